"""The peer of bench/serve_bench.sh: the same MLP in PyTorch served the way Python users usually
serve a model, FastAPI with uvicorn (one worker, pydantic-validated requests, torch.no_grad,
eval mode), answering the same Open Inference Protocol v2 infer route as `loom serve`.
Usage: serve_peer.py WEIGHTS.safetensors PORT THREADS (FastAPI and uvicorn pinned in
bench/requirements-serve.txt; PyTorch is Debian's python3-torch)."""
import json
import struct
import sys

import torch
import uvicorn
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel


def load_safetensors(path):
    """The safetensors format read by hand (header length, JSON header, raw little-endian data)."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] == "F32", meta
        b, e = meta["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[b:e]), dtype=torch.float32).reshape(meta["shape"])
    return out


weights_path, port, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
w = load_safetensors(weights_path)
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
with torch.no_grad():  # Loom's Linear keeps weights as (in, out); torch's as (out, in)
    model[0].weight.copy_(w["hidden/weights"].T)
    model[0].bias.copy_(w["hidden/bias"])
    model[2].weight.copy_(w["logits/weights"].T)
    model[2].bias.copy_(w["logits/bias"])
model.eval()


class Input(BaseModel):
    name: str
    shape: list[int]
    datatype: str
    data: list


class Request(BaseModel):
    inputs: list[Input]
    id: str | None = None


app = FastAPI()


@app.post("/v2/models/mlp/infer")
def infer(request: Request):
    x = request.inputs[0]
    if x.datatype != "FP32" or len(x.shape) != 2 or x.shape[1] != 784:
        raise HTTPException(status_code=400, detail="the model takes FP32 [-1, 784]")
    with torch.no_grad():
        y = model(torch.tensor(x.data, dtype=torch.float32).reshape(x.shape))
    return {"model_name": "mlp", "model_version": "1",
            "outputs": [{"name": "logits", "datatype": "FP32", "shape": list(y.shape), "data": y.reshape(-1).tolist()}]}


uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
