# SPDX-License-Identifier: Apache-2.0
"""Arrays in and out of the C extension: numpy arrays and torch CPU tensors, zero copy.

Every tensor goes to C as (buffer, dtype_name, logical_shape). BF16 travels as its bit pattern in a
numpy uint16 array (numpy has no bfloat16); a torch.bfloat16 tensor is viewed as int16 then uint16
without a copy. Packed 4-bit formats (int4, fp4_e2m1) are uint8 arrays whose last dimension holds two
elements per byte; their logical last dimension is given separately (default: twice the bytes).
"""
import sys

import numpy as np

from ._megamoe import InvalidArgumentError

# numpy storage of each megamoe dtype (canonical names of mm_dtype_name)
STORAGE = {
    "bool": np.bool_, "u8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
    "int64": np.int64, "uint64": np.uint64, "f16": np.float16, "bf16": np.uint16, "f32": np.float32,
    "f64": np.float64, "fp8_e4m3fn": np.uint8, "fp8_e5m2": np.uint8, "e8m0": np.uint8,
    "fp4_e2m1": np.uint8, "fp4_e1m2": np.uint8, "hifloat8": np.uint8, "int4": np.uint8,
}
PACKED4 = ("int4", "fp4_e2m1", "fp4_e1m2")
# the dtype a plain numpy array stands for (uint16 is BF16: megamoe has no U16)
_INFER = {np.dtype(v): k for k, v in STORAGE.items() if v not in (np.uint8, np.uint16)}
_INFER[np.dtype(np.uint8)] = "u8"
_INFER[np.dtype(np.uint16)] = "bf16"


def _torch():
    return sys.modules.get("torch")  # a tensor can only arrive if torch is already imported


def is_torch(obj):
    t = _torch()
    return t is not None and isinstance(obj, t.Tensor)


def to_numpy(obj, name):
    """(numpy array, dtype name implied by the object or None) without copying."""
    if is_torch(obj):
        torch = _torch()
        if obj.device.type != "cpu":
            raise InvalidArgumentError(f"{name}: tensor is on {obj.device}; megamoe runs on the CPU (.cpu())")
        if not obj.is_contiguous():
            raise InvalidArgumentError(f"{name}: tensor is not contiguous (call .contiguous())")
        obj = obj.detach()
        if obj.dtype == torch.bfloat16:
            return obj.view(torch.int16).numpy().view(np.uint16), "bf16"
        return obj.numpy(), None
    if isinstance(obj, np.ndarray):
        return obj, None
    if isinstance(obj, (list, tuple, int, float)):
        return np.asarray(obj), None
    raise InvalidArgumentError(f"{name}: expected a numpy array or a torch tensor, got {type(obj).__name__}")


def spec(obj, name, dtype=None, shape=None):
    """The (buffer, dtype, shape) triple the extension takes; None stays None."""
    if obj is None:
        return None
    arr, implied = to_numpy(obj, name)
    if not arr.flags.c_contiguous:
        raise InvalidArgumentError(f"{name}: array is not C-contiguous (use np.ascontiguousarray)")
    if dtype is None:
        dtype = implied or _INFER.get(arr.dtype)
        if dtype is None:
            raise InvalidArgumentError(f"{name}: numpy dtype {arr.dtype} has no megamoe dtype")
    if np.dtype(STORAGE.get(dtype, arr.dtype)).itemsize != arr.dtype.itemsize:
        raise InvalidArgumentError(f"{name}: a {arr.dtype} array cannot hold {dtype}")
    if shape is None:
        shape = arr.shape
        if dtype in PACKED4 and shape:
            shape = shape[:-1] + (2 * shape[-1],)
    return (arr, dtype, tuple(int(s) for s in shape))


def empty(shape, dtype):
    """A new array for a megamoe dtype (packed 4-bit: bytes of the logical shape)."""
    shape = tuple(shape)
    if dtype in PACKED4 and shape:
        shape = shape[:-1] + ((shape[-1] + 1) // 2,)
    return np.empty(shape, STORAGE[dtype])


def like_input(arr, dtype, as_torch):
    """Returns arr as a torch tensor (BF16 as torch.bfloat16) when the caller passed torch tensors."""
    if not as_torch:
        return arr
    torch = _torch()
    if dtype == "bf16":
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)
