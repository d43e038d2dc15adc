"""Reference Triton kernels for the inference-tensor hazard that imlint looks for.

A page split of footer-layout FP8 KV-cache pages into 64-token pages, with persistent,
grow-only scratch (destination pages and an int8 page mask) allocated under
``torch.inference_mode(False)``; see ``NOTES.md`` beside this file. Needs torch and triton
(the ``kernels`` extra).
"""

from .layout import (
    DST_PAGE_BYTES,
    DST_PAGE_SIZE,
    SUPPORTED_SRC_PBS,
    TOKEN_BYTES,
    TOKEN_DATA_BYTES,
    TOKEN_SCALE_BYTES,
    packed_page_bytes,
    padded_page_bytes,
    paged_view,
)
from .page_split import (
    DST_KEY,
    INTERPRETED,
    MASK_KEY,
    SCRATCH,
    get_dst_buffer,
    get_page_mask,
    mark_pages,
    split_kv_pages_to_64,
)
from .reference import (
    mark_pages_reference,
    split_kv_pages_to_64_reference,
    token_bytes_reference,
)

__all__ = [
    "DST_KEY",
    "DST_PAGE_BYTES",
    "DST_PAGE_SIZE",
    "INTERPRETED",
    "MASK_KEY",
    "SCRATCH",
    "SUPPORTED_SRC_PBS",
    "TOKEN_BYTES",
    "TOKEN_DATA_BYTES",
    "TOKEN_SCALE_BYTES",
    "get_dst_buffer",
    "get_page_mask",
    "mark_pages",
    "mark_pages_reference",
    "packed_page_bytes",
    "padded_page_bytes",
    "paged_view",
    "split_kv_pages_to_64",
    "split_kv_pages_to_64_reference",
    "token_bytes_reference",
]
