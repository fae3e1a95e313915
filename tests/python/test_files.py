# SPDX-License-Identifier: Apache-2.0
"""Safetensors and case files: round trips, a file written by hand (independent writer) read back, and
malformed input raising InvalidFileError / IoError with the library's message."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

import megamoe


def write_by_hand(path, tensors, metadata=None):
    """A minimal safetensors writer from the format's definition (8-byte LE header length, JSON header)."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, arr) in tensors.items():
        data = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_read_hand_written_file(tmp_path, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.integers(0, 65535, (2, 5)).astype(np.uint16)
    c = rng.integers(-100, 100, (7,)).astype(np.int64)
    path = tmp_path / "hand.safetensors"
    write_by_hand(path, {"a": ("F32", a), "b": ("BF16", b), "c": ("I64", c)}, {"op": "demo"})
    tensors, meta = megamoe.read_safetensors(str(path))
    assert meta == {"op": "demo"}
    assert tensors["b"].dtype == "bf16" and tensors["b"].array.dtype == np.uint16
    np.testing.assert_array_equal(tensors["a"].array, a)
    np.testing.assert_array_equal(tensors["b"].array, b)
    np.testing.assert_array_equal(megamoe.load(path)["c"], c)
    assert list(megamoe.load(path, names=["c"])) == ["c"]
    with pytest.raises(KeyError):
        megamoe.load(path, names=["nope"])


def test_round_trip_with_logical_dtypes(tmp_path, rng):
    w4 = megamoe.int4_pack(rng.integers(-8, 8, (3, 5)).astype(np.int8))  # (3, 3) bytes, 5 elements per row
    fp8 = rng.integers(0, 256, (4, 8)).astype(np.uint8)
    tensors = {
        "x": rng.integers(0, 65535, (2, 3)).astype(np.uint16),
        "w4": megamoe.Tensor(w4, "int4", (3, 5)),
        "q": megamoe.Tensor(fp8, "fp8_e4m3fn", fp8.shape),
        "s": rng.standard_normal(3).astype(np.float32),
    }
    path = str(tmp_path / "rt.safetensors")
    megamoe.save(path, tensors, {"k": "v"})
    got, meta = megamoe.read_safetensors(path)
    assert meta == {"k": "v"}
    assert got["w4"].dtype == "int4" and got["w4"].shape == (3, 5)
    np.testing.assert_array_equal(got["w4"].array, w4)
    assert got["q"].dtype == "fp8_e4m3fn"
    np.testing.assert_array_equal(got["q"].array, fp8)
    np.testing.assert_array_equal(got["x"].array, tensors["x"])
    # the stored header is standard safetensors: int4 travels as U8 with its logical dtype in metadata
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    assert header["w4"]["dtype"] == "U8" and header["__metadata__"]["dtype.w4"] == "int4"


def test_torch_bf16_round_trip(tmp_path):
    torch = pytest.importorskip("torch")
    t = torch.randn(4, 6).to(torch.bfloat16)
    path = str(tmp_path / "t.safetensors")
    megamoe.save(path, {"t": t})
    arr = megamoe.load(path)["t"]
    assert arr.dtype == np.uint16
    back = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    assert torch.equal(back, t)


def test_bad_files(tmp_path):
    with pytest.raises(megamoe.IoError) as e:
        megamoe.load(str(tmp_path / "missing.safetensors"))
    assert isinstance(e.value, OSError) and e.value.status_name == "io_error"
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(megamoe.InvalidFileError, match="header"):
        megamoe.load(str(bad))
    gap = tmp_path / "gap.safetensors"
    text = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}).encode()
    gap.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 8)  # shape says 8 bytes, range 4
    with pytest.raises(megamoe.InvalidFileError) as e:
        megamoe.load(str(gap))
    assert "a" in str(e.value) and isinstance(e.value, ValueError)


def test_run_case_file(tmp_path):
    cli = os.environ.get("MEGAMOE_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("MEGAMOE_CLI (the megamoe command) not given")
    case = str(tmp_path / "case.safetensors")
    subprocess.run([cli, "case-gen", "mega-moe", "-o", case], check=True, capture_output=True)
    tensors, attrs = megamoe.read_case(case)
    assert attrs["op"] == "mega_moe"
    out_py, out_cli = str(tmp_path / "py.safetensors"), str(tmp_path / "cli.safetensors")
    megamoe.run_case(case, out_py)
    subprocess.run([cli, "case", case, "-o", out_cli], check=True, capture_output=True)
    a, b = megamoe.load(out_py), megamoe.load(out_cli)
    assert a.keys() == b.keys() and len(a) > 0
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    broken = dict(tensors)
    name = next(k for k in tensors if "topk_ids" in k)
    ids = tensors[name].array.copy()
    ids.flat[0] = 10**6
    broken[name] = megamoe.Tensor(ids, tensors[name].dtype, tensors[name].shape)
    megamoe.save(str(tmp_path / "broken.safetensors"), broken, attrs)
    with pytest.raises(megamoe.InvalidArgumentError, match="topk_ids"):
        megamoe.run_case(str(tmp_path / "broken.safetensors"), out_py)
