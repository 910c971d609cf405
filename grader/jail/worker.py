"""The learner's side of a jail: imports the submission's modules and answers the grader's requests.

It runs in a process forked from the zygote (zygote.py), after the jail is closed around it, and
imports only the standard library, torch and wire.py from its own folder. Everything it returns is
plain data or a handle; the grader decides the grade from that data and never trusts an object from
here.
"""

import errno
import faulthandler
import importlib.abc
import importlib.util
import os
import signal
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire

PACKAGE = "submission"  # learner files are also importable as submission.<name>, for relative imports


class _LearnerLoader(importlib.abc.SourceLoader):
    """Loads a learner file under its bare name, with __package__ set so `from .x import y` works."""

    def __init__(self, path):
        self.path = path

    def get_filename(self, fullname):
        return self.path

    def get_data(self, path):
        with open(path, "rb") as f:
            return f.read()

    def exec_module(self, module):
        module.__package__ = PACKAGE
        super().exec_module(module)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, bare):
        self.bare = bare

    def create_module(self, spec):
        return importlib.import_module(self.bare)

    def exec_module(self, module):
        pass


class LearnerFinder(importlib.abc.MetaPathFinder):
    """`attention` and `submission.attention` are the same module object, loaded once."""

    def __init__(self, root, names):
        self.root, self.names = root, set(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname == PACKAGE:
            spec = importlib.util.spec_from_loader(fullname, loader=None, is_package=True)
            assert spec is not None, "a loader-less package spec is always made"
            spec.submodule_search_locations = [self.root]
            return spec
        if fullname in self.names:
            file = os.path.join(self.root, fullname + ".py")
            return importlib.util.spec_from_file_location(fullname, file, loader=_LearnerLoader(file))
        if fullname.startswith(PACKAGE + ".") and fullname[len(PACKAGE) + 1 :] in self.names:
            return importlib.util.spec_from_loader(fullname, _AliasLoader(fullname[len(PACKAGE) + 1 :]))
        return None


class Worker:
    def __init__(self, root):
        self.root = root
        self.objects = {}  # handle id -> learner object kept alive in the jail
        self.next_id = 1
        # the operations, bound now: learner code that patches the class later changes nothing
        # here (the grades never depend on it: every verdict is recomputed in the grader)
        self.ops = {name[3:]: getattr(self, name) for name in dir(type(self)) if name.startswith("op_")}

    # -- handles -------------------------------------------------------------------------
    def to_handle(self, obj):
        hid = self.next_id
        self.next_id += 1
        self.objects[hid] = obj
        return wire.Handle(hid, type(obj).__name__)

    def from_handle(self, h):
        if h.id not in self.objects:
            raise LookupError(f"handle {h.id} is not known in this jail")
        return self.objects[h.id]

    def resolve(self, target):
        """target: {"module": name} or {"handle": id}, plus an attribute path."""
        obj = sys.modules[target["module"]] if "module" in target else self.objects[int(target["handle"])]
        for name in target.get("path", []):
            obj = getattr(obj, name)
        return obj

    # -- operations ----------------------------------------------------------------------
    def op_import(self, req):
        sys.meta_path.insert(0, LearnerFinder(self.root, req["modules"]))
        sys.path.insert(0, self.root)
        results: dict[str, dict | None] = {}
        for name in req["modules"]:
            try:
                importlib.import_module(name)
                results[name] = None
            except BaseException as exc:  # noqa: BLE001 - a learner file may raise anything
                results[name] = describe(exc)
        return results

    def op_missing(self, req):
        module = sys.modules[req["module"]]
        return [n for n in req["names"] if not hasattr(module, n)]

    def op_call(self, req):
        fn = self.resolve(req["target"])
        return fn(*req.get("args", []), **req.get("kwargs", {}))

    def op_get(self, req):
        return self.resolve(req["target"])

    def op_params(self, req):
        """Each parameter's name, shape and identity, so the grader can see tying and count."""
        import torch.nn as nn

        module = self.resolve(req["target"])
        if not isinstance(module, nn.Module):
            raise TypeError(f"{type(module).__name__} is not an nn.Module")
        ids: dict[int, int] = {}
        rows = []
        for name, p in module.named_parameters(remove_duplicate=False):
            key = ids.setdefault(id(p), len(ids))
            rows.append(
                {
                    "name": name,
                    "shape": list(p.shape),
                    "dtype": str(p.dtype).replace("torch.", ""),
                    "object": key,
                }
            )
        return rows

    def op_load(self, req):
        """Load the grader's weights by the attribute names of SPEC (the learner's init is not graded)."""
        import torch

        module = self.resolve(req["target"])
        state = req["state"]
        own = dict(module.named_parameters(remove_duplicate=False))
        own.update(dict(module.named_buffers()))
        missing = [k for k in state if k not in own]
        if missing:
            return {"missing": missing}
        with torch.no_grad():
            for name, value in state.items():
                target = own[name]
                if tuple(target.shape) != tuple(value.shape):
                    return {"shape": [name, list(target.shape), list(value.shape)]}
                target.copy_(value.to(target.dtype))
        return {"loaded": len(state)}

    def op_state(self, req):
        module = self.resolve(req["target"])
        return {k: v.detach().clone() for k, v in module.state_dict().items()}

    def op_train_lm(self, req):
        """The training probe: train the learner's GPT on the grader's corpus, all in one call.

        Batches come from the grader's own windowing and the loss is computed here from the
        learner's logits, so what is measured is the model alone.
        """
        import torch
        import torch.nn.functional as F

        model = self.resolve(req["target"])
        data = req["data"].to(torch.int64)
        T, B = req["block_size"], req["batch_size"]
        gen = torch.Generator().manual_seed(req["seed"])
        opt = torch.optim.AdamW(model.parameters(), lr=req["lr"], weight_decay=0.0)
        losses = []
        model.train()
        for _ in range(req["steps"]):
            starts = torch.randint(len(data) - T, (B,), generator=gen)
            x = torch.stack([data[i : i + T] for i in starts.tolist()])
            y = torch.stack([data[i + 1 : i + 1 + T] for i in starts.tolist()])
            out = model(x)
            logits = out[0] if isinstance(out, tuple) else out
            loss = F.cross_entropy(logits.reshape(B * T, -1).float(), y.reshape(B * T))
            losses.append(float(loss))
            if not torch.isfinite(loss):
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return losses

    def op_batch(self, req):
        """Several requests in one round trip (weights to load, then a call). A load that does
        not fit stops the batch; an exception stops it too, and is the answer."""
        done = []
        for sub in req["requests"]:
            result = self.ops[sub["op"]](sub)
            done.append(result)
            if sub["op"] == "load" and ("missing" in result or "shape" in result):
                break
        return {"done": done}

    def op_release(self, req):
        for hid in req["handles"]:
            self.objects.pop(int(hid), None)
        return None


def describe(exc: BaseException) -> dict:
    """An exception as plain data: type, message, and where in the learner's files it was raised."""
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith(ROOT):
            where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
    if isinstance(exc, SyntaxError) and exc.filename and exc.filename.startswith(ROOT):
        where = f"{os.path.basename(exc.filename)}:{exc.lineno}"
    # what happened is sent as flags: the grader words the message (in the learner's language)
    flags = {}
    try:
        message = str(exc)[: wire.MAX_STRING]
    except BaseException:  # noqa: BLE001 - a learner's exception may lie in __str__ too
        message, flags["unreadable"] = "", True
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        flags["too_large"] = True
    memory = (
        isinstance(exc, MemoryError)
        or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM)
        or (
            isinstance(exc, RuntimeError)
            and ("can't allocate memory" in message or "not enough memory" in message)
        )
    )
    try:
        type_name, mro = type(exc).__name__, [c.__name__ for c in type(exc).__mro__]
    except BaseException:  # noqa: BLE001
        type_name, mro = "Exception", ["Exception", "BaseException", "object"]
    return {
        "type": str(type_name)[:200],
        "mro": [str(n)[:200] for n in mro[:32]],
        "message": message,
        "where": where[:200]
        if where
        else where,  # a frame's file name may be huge; capped again by the grader
        "memory": memory,
        **flags,
    }


def read_exact(fd, n):
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            raise EOFError
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Reader:
    """Frames from the grader, read in as few system calls as the pipe allows."""

    def __init__(self, fd):
        self.fd, self.buf = fd, bytearray()

    def take(self, n):
        while len(self.buf) < n:
            b = os.read(self.fd, max(n - len(self.buf), 1 << 16))
            if not b:
                raise EOFError
            self.buf += b
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data


def answer(worker, body) -> bytes:
    """One request frame in, one reply frame out; a learner's exception becomes an error reply."""
    try:
        req = wire.decode(body, from_handle=worker.from_handle)
        result = worker.ops[req["op"]](req)
    except BaseException as exc:  # noqa: BLE001 - report, never die, on a learner's exception
        return wire.encode({"error": describe(exc)})
    try:
        return wire.encode({"ok": result}, to_handle=worker.to_handle)
    except wire.WireError as exc:
        return wire.encode(
            {
                "error": {
                    "type": "WireError",
                    "mro": ["WireError", "Exception"],
                    "where": None,
                    "memory": False,
                    "message": str(exc),
                    "unsendable": True,
                }
            }
        )
    except BaseException as exc:  # noqa: BLE001
        return wire.encode({"error": describe(exc)})


def serve(proto_in, proto_out, worker):
    reader = Reader(proto_in)
    while True:
        try:
            length = wire.frame_length(reader.take(wire.PREFIX_BYTES))
        except EOFError:
            return
        write_all(proto_out, answer(worker, reader.take(length)))


def rehearse():
    """Answer a few requests of each kind to no one (a spare jail, before its submission comes).

    A forked process pays a copy-on-write fault for every page it first writes, and Python writes
    to every object it touches (reference counts): the first requests of a fresh jail cost a few
    times the later ones. Paid here, that cost is off the grader's critical path."""
    import torch

    worker = Worker("/nonexistent")
    module = worker.to_handle(torch.nn.Linear(4, 4))
    target = {"handle": module.id}
    requests = [
        {
            "op": "call",
            "target": {"module": "torch", "path": ["neg"]},
            "args": [torch.ones(2, 3)],
            "kwargs": {},
        },
        {
            "op": "call",
            "target": {"module": "torch", "path": ["nn", "Linear"]},
            "args": [4, 4],
            "kwargs": {"bias": True},
        },
        {"op": "load", "target": target, "state": {"weight": torch.zeros(4, 4), "bias": torch.zeros(4)}},
        {
            "op": "call",
            "target": target,
            "args": [torch.ones(2, 4, dtype=torch.float64).float()],
            "kwargs": {},
        },
        {"op": "params", "target": target},
        {"op": "state", "target": target},
        {"op": "missing", "module": "torch", "names": ["neg", "no_such_name"]},
        {"op": "call", "target": {"module": "torch", "path": ["no_such_name"]}, "args": [], "kwargs": {}},
        {"op": "release", "handles": [module.id]},
    ]
    for _ in range(2):
        for req in requests:
            reply = answer(worker, wire.encode(req)[wire.PREFIX_BYTES :])
            wire.decode(reply[wire.PREFIX_BYTES :])


ROOT = ""  # the submission's folder in the jail; set by the zygote before serving
HERE = os.path.dirname(os.path.abspath(__file__))
OWN_MODULES = ("worker", "wire", "sandbox")  # this folder's modules a jail has loaded


def hide_own_modules():
    """Before learner code runs: take this folder off sys.path and its modules out of
    sys.modules, so `import worker` or sys.modules["worker"] does not hand learner code the
    serving loop. What serving needs stays held by reference (the Worker, its bound operations,
    these functions' globals). Only a hurdle, not a wall: learner code can still find live
    objects (gc), and no grade depends on this."""
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
    sys.path_importer_cache.pop(HERE, None)
    for name in OWN_MODULES:
        sys.modules.pop(name, None)


STACK_SIGNAL = signal.SIGUSR2  # the grader's "where are you?" before it stops a call over budget


def run(root, proto_in, proto_out, ready: dict, modules=(), names=None, after_ready=None, stack_fd=None):
    """Import the learner's modules, send the ready reply (with how each import went, and the
    names each module lacks), then serve the grader until it closes the protocol pipe.

    stack_fd: before any learner code runs, a C-level handler is registered that writes every
    thread's Python stack there on STACK_SIGNAL; it runs even inside `while True: pass`."""
    global ROOT
    ROOT = root
    worker = Worker(root)
    if stack_fd is not None:
        faulthandler.register(STACK_SIGNAL, file=stack_fd, all_threads=True, chain=False)
    hide_own_modules()
    if modules:
        imports = worker.op_import({"modules": list(modules)})
        missing = {}
        for module, wanted in (names or {}).items():
            if module in imports and imports[module] is None:
                try:
                    missing[module] = worker.op_missing({"module": module, "names": wanted})
                except BaseException as exc:  # noqa: BLE001 - a module __getattr__ may raise anything
                    imports[module] = describe(exc)
        ready = dict(ready, imports=imports, missing=missing)
    write_all(proto_out, wire.encode({"ok": ready}))
    if after_ready is not None:
        after_ready()
    serve(proto_in, proto_out, worker)
