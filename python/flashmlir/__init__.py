"""flash-mlir from Python.

``flashmlir.runtime`` launches kernels compiled by ``fa-compile`` on torch
tensors and needs only torch and an NVIDIA driver.
"""

__all__ = ["runtime"]
