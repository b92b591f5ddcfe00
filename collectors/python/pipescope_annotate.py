"""NVTX ranges that pipescope's analysis reads: pipeline stage, microbatch,
forward/backward, and per-layer time.

One call per stage module does it::

    import pipescope_annotate as psa
    model = psa.annotate(model, stage=rank, chunk=0)

and every forward call of `model` becomes a range named
``pipescope/forward mb=<k> stage=<s> chunk=<c>`` (k counts forward calls since
the last optimizer step), its backward pass ``pipescope/backward mb=<k> ...``,
and each layer's forward ``pipescope/layer <name>``. Hand-written schedules can
name microbatches themselves::

    with psa.forward(mb=3, stage=1):
        y = model(x)
    with psa.backward(mb=3, stage=1):
        y.backward(grad)

A range around each training iteration tells the analysis exactly where
iterations begin and end (otherwise it finds them from the microbatch
numbers starting over, or from the optimizer's periodic kernels)::

    for step in range(steps):
        with psa.iteration(step):
            train_step()

Everything is a no-op when PyTorch or CUDA is missing, or when
PIPESCOPE_ANNOTATE=0; the ranges cost about a microsecond each and are seen by
`pipescope capture`, Nsight Systems and the PyTorch profiler alike.
"""

import contextlib
import os
import threading

__all__ = ["annotate", "forward", "backward", "layer", "iteration", "range", "enabled", "reset_microbatches"]

PREFIX = "pipescope/"

_lock = threading.Lock()
_nvtx_module = None
_checked = False
_step_hook = None
_models = []  # (weakref to annotated module state) reset on optimizer steps


def _nvtx():
    """torch.cuda.nvtx when usable, else None (decided once)."""
    global _nvtx_module, _checked
    if _checked:
        return _nvtx_module
    with _lock:
        if not _checked:
            if os.environ.get("PIPESCOPE_ANNOTATE", "1") != "0":
                try:
                    import torch

                    if torch.cuda.is_available():
                        nvtx = torch.cuda.nvtx
                        nvtx.range_push("pipescope/probe")
                        nvtx.range_pop()
                        _nvtx_module = nvtx
                except Exception:  # no torch, no CUDA, or a build without NVTX
                    _nvtx_module = None
            _checked = True
    return _nvtx_module


def enabled():
    """True when ranges are being emitted."""
    return _nvtx() is not None


def _step_name(kind, mb, stage, chunk):
    return "%s%s mb=%d stage=%d chunk=%d" % (PREFIX, kind, int(mb), int(stage), int(chunk))


@contextlib.contextmanager
def range(name):
    """An NVTX push/pop range named `name` (no prefix added)."""
    nvtx = _nvtx()
    if nvtx is None:
        yield
        return
    nvtx.range_push(name)
    try:
        yield
    finally:
        nvtx.range_pop()


def forward(mb, stage, chunk=0):
    """Range around the forward pass of microbatch `mb` on pipeline `stage` (virtual stage `chunk`)."""
    return range(_step_name("forward", mb, stage, chunk))


def backward(mb, stage, chunk=0):
    """Range around the backward pass of microbatch `mb` on pipeline `stage`."""
    return range(_step_name("backward", mb, stage, chunk))


@contextlib.contextmanager
def iteration(n):
    """Range named ``pipescope/iteration <n>`` around one training iteration.
    Microbatch numbering of annotated models starts again at 0 inside it."""
    reset_microbatches()
    with range(PREFIX + "iteration " + str(int(n))):
        yield


def layer(name):
    """Range around one layer's work."""
    return range(PREFIX + "layer " + str(name))


class _StageState:
    def __init__(self, stage, chunk):
        self.stage = stage
        self.chunk = chunk
        self.next_mb = 0


def reset_microbatches(model=None):
    """Start numbering microbatches from 0 again (done after every optimizer step)."""
    for state in list(_models):
        if model is None or getattr(model, "_pipescope_state", None) is state:
            state.next_mb = 0


def _install_step_hook():
    global _step_hook
    if _step_hook is not None:
        return
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        _step_hook = register_optimizer_step_post_hook(lambda *args, **kwargs: reset_microbatches())
    except Exception:
        _step_hook = False  # older PyTorch: call reset_microbatches() yourself


def _layer_names(model):
    """Direct children, and the items of containers directly under the model."""
    import torch.nn as nn

    containers = (nn.ModuleList, nn.Sequential, nn.ModuleDict)
    names = []
    if isinstance(model, containers):
        return [(n, m) for n, m in model.named_children()]
    for name, child in model.named_children():
        if isinstance(child, containers):
            names.extend(("%s.%s" % (name, n), m) for n, m in child.named_children())
        else:
            names.append((name, child))
    return names


class _BackwardRange:
    """A start/end NVTX range over one microbatch's backward pass: it opens when
    the first gradient reaches the stage's outputs and closes when autograd
    finishes that pass. Start/end (not push/pop) ranges, because autograd may
    run the end on another thread."""

    def __init__(self, name):
        self.name = name
        self.id = None
        self.done = False

    def begin(self):
        if self.id is not None or self.done:
            return
        nvtx = _nvtx()
        if nvtx is None:
            return
        self.id = nvtx.range_start(self.name)
        try:
            import torch

            torch.autograd.Variable._execution_engine.queue_callback(self.end)
        except Exception:
            self.end()

    def end(self):
        if self.id is not None and not self.done:
            self.done = True
            _nvtx().range_end(self.id)


def _push_hook(nvtx, label):
    # Hooks must return None: a value would replace the module's input or output.
    def hook(module, args):
        nvtx.range_push(label)

    return hook


def _pop_hook(nvtx):
    def hook(module, args, output):
        nvtx.range_pop()

    return hook


def annotate(model, stage=0, chunk=0, layers=True, backward=True):
    """Adds pipescope's NVTX ranges to `model` (one pipeline stage, or one
    virtual stage `chunk` of it) and returns it. Safe to call when CUDA or
    pipescope is absent: then it changes nothing."""
    if _nvtx() is None or getattr(model, "_pipescope_state", None) is not None:
        return model
    import torch

    state = _StageState(int(stage), int(chunk))
    model._pipescope_state = state
    _models.append(state)
    _install_step_hook()
    nvtx = _nvtx()
    local = threading.local()

    def pre(module, args):
        mb = state.next_mb
        if torch.is_grad_enabled() and module.training:
            state.next_mb += 1
        local.mb = mb
        nvtx.range_push(_step_name("forward", mb, state.stage, state.chunk))

    def post(module, args, output):
        nvtx.range_pop()
        if not backward or not torch.is_grad_enabled():
            return None
        rng = _BackwardRange(_step_name("backward", getattr(local, "mb", 0), state.stage, state.chunk))

        # A tensor hook fires when the gradient reaches the stage's output:
        # the backward pass of this microbatch begins. The output is left as is.
        def watch(t):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(lambda grad: rng.begin())
            elif isinstance(t, (tuple, list)):
                for x in t:
                    watch(x)
            elif isinstance(t, dict):
                for x in t.values():
                    watch(x)

        watch(output)
        return None

    model.register_forward_pre_hook(pre)
    model.register_forward_hook(post)

    if layers:
        chosen = _layer_names(model) if layers is True else [(n, model.get_submodule(n)) for n in layers]
        for name, sub in chosen:
            sub.register_forward_pre_hook(_push_hook(nvtx, PREFIX + "layer " + name))
            sub.register_forward_hook(_pop_hook(nvtx))
    return model
