# SPDX-License-Identifier: Apache-2.0
"""tests/cli/lib/safetensors_io.py: the CLI tests' own reader and writer of safetensors files (standard
library only), shared by the Python checks of case_round_trip.sh, dispatch_combine_case.sh and
mega_moe_case.py. It is written from the format description, not from megamoe's C reader, so the checks
stay independent of the code they test.

  load(path)                 -> (metadata dict, {name: (dtype, shape list, bytearray)}) in data order
  save(path, meta, tensors)  writes tensors in the dict's order; the header is padded to 8 bytes

The tensor bytes are a bytearray so that a check may edit a tensor in place (struct.pack_into)."""
import json
import struct


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, v in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = v["data_offsets"]
        tensors[name] = (v["dtype"], list(v["shape"]), bytearray(data[b:e]))
    return meta, tensors


def save(path, meta, tensors):
    header = {"__metadata__": meta}
    blob = bytearray()
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob)
