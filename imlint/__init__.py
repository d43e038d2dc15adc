"""imlint: find and fix lazily allocated persistent PyTorch buffers that become inference tensors."""

__version__ = "0.1.0"
