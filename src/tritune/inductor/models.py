"""The models ``tritune harvest`` compiles: built in, or any ``module:callable`` the user names.

Built in (random weights, nothing downloaded; the GPU machine has no network):
  ``bert``                 transformers ``BertForMaskedLM(BertConfig(attn_implementation="eager"))``
                           on token ids [batch, 128]; eager attention keeps the explicit softmax
                           kernels, as in TorchBench's BERT (sdpa would hide them).
  ``coat_lite_mini``, ``convit_base``, ``botnet26t_256``, ``beit_base_patch16_224``
                           ``timm.create_model(name, pretrained=False)`` on images of the model's
                           native input size (botnet26t_256: 256x256).

The ``module:callable`` contract: ``callable`` is called with those of ``batch`` (int),
``dtype`` (torch.dtype), ``device`` (str) and ``mode`` ("train"/"infer") that it accepts, and
returns ``(model, inputs)`` or ``(model, inputs, loss_fn)``: ``inputs`` a tuple/list (positional
arguments), a dict (keyword arguments) or one tensor; ``loss_fn(output) -> scalar tensor`` for a
training step (default: the mean of every floating-point tensor in the output, summed). tritune
moves the model and input tensors to the device if they are elsewhere; dtypes are the callable's
business. Example: ``tritune harvest --model mypkg.models:small_mlp --out runs/mlp``.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Any, Callable

TIMM_MODELS = ("coat_lite_mini", "convit_base", "botnet26t_256", "beit_base_patch16_224")
BUILTIN = ("bert",) + TIMM_MODELS
BERT_SEQUENCE = 128
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class ModelError(ValueError):
    """A model name that names nothing usable; the message says why in one line."""


@dataclasses.dataclass
class Workload:
    model: Any
    inputs: Any  # tuple (positional), dict (keywords)
    loss_fn: Callable[[Any], Any] | None = None

    def forward(self) -> Any:
        if isinstance(self.inputs, dict):
            return self.model(**self.inputs)
        return self.model(*self.inputs)


def parse_reference(text: str) -> tuple[str, str]:
    """``"pkg.mod:fn"`` -> ``("pkg.mod", "fn")``; ModelError for anything else."""
    if text.count(":") != 1:
        raise ModelError(f"model {text!r}: expected one of {', '.join(BUILTIN)} or MODULE:CALLABLE")
    module, attr = text.split(":")
    if not _DOTTED.match(module):
        raise ModelError(f"model {text!r}: {module!r} is not a module name (MODULE:CALLABLE)")
    if not _DOTTED.match(attr):
        raise ModelError(f"model {text!r}: {attr!r} is not a callable's name (MODULE:CALLABLE)")
    return module, attr


def resolve(text: str) -> Callable[..., Any]:
    """The factory for a built-in name or a ``module:callable``."""
    if text == "bert":
        return bert
    if text in TIMM_MODELS:
        return _timm_factory(text)
    module_name, attr = parse_reference(text)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelError(f"model {text!r}: cannot import {module_name}: {exc}") from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ModelError(f"model {text!r}: {module_name} has no {attr}")
    if not callable(target):
        raise ModelError(f"model {text!r}: {module_name}.{attr} is not callable")
    return target


def build(factory: Callable[..., Any], *, batch: int, dtype: Any, device: str, mode: str) -> Workload:
    """Call ``factory`` with the keywords it accepts and normalise what it returns."""
    offered = {"batch": batch, "dtype": dtype, "device": device, "mode": mode}
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in offered.items() if takes_all or k in params}
    made = factory(**kwargs)
    name = getattr(factory, "__qualname__", repr(factory))
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise ModelError(f"{name} returned {type(made).__name__}; expected (model, inputs) or (model, inputs, loss_fn)")
    model, inputs, loss_fn = (*made, None) if len(made) == 2 else made
    if not callable(model):
        raise ModelError(f"{name}: the model ({type(model).__name__}) is not callable")
    if loss_fn is not None and not callable(loss_fn):
        raise ModelError(f"{name}: loss_fn ({type(loss_fn).__name__}) is not callable")
    if not isinstance(inputs, (tuple, list, dict)):
        inputs = (inputs,)
    return Workload(_to(model, device), _to(inputs, device), loss_fn)


def default_loss(output: Any) -> Any:
    """Sum of the means of every floating-point tensor in ``output`` (nested containers too)."""
    import torch

    found = []

    def walk(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            if value.is_floating_point() and value.requires_grad:
                found.append(value.float().mean())
        elif isinstance(value, dict) or hasattr(value, "to_tuple"):
            for item in (value.values() if isinstance(value, dict) else value.to_tuple()):
                walk(item)
        elif isinstance(value, (tuple, list)):
            for item in value:
                walk(item)

    walk(output)
    if not found:
        raise ModelError("the model's output holds no floating-point tensor that needs a gradient: "
                         "nothing to train (pass a loss_fn, or use --mode infer)")
    return sum(found[1:], found[0])


def _to(value: Any, device: str) -> Any:
    if hasattr(value, "to") and hasattr(value, "parameters"):  # an nn.Module
        return value.to(device)
    if hasattr(value, "to") and hasattr(value, "device"):  # a tensor
        return value if str(value.device) == device else value.to(device)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_to(v, device) for v in value)
    return value


# ----------------------------------------------------------------------------- built-in models

def bert(batch: int, dtype: Any, device: str) -> tuple:
    import torch
    import torch.nn.functional as F
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(attn_implementation="eager")
    model = BertForMaskedLM(config).to(device, dtype)
    ids = torch.randint(0, config.vocab_size, (batch, BERT_SEQUENCE), device=device)

    def loss_fn(out: Any) -> Any:
        return F.cross_entropy(out.logits.float().view(-1, config.vocab_size), ids.view(-1))

    return model, {"input_ids": ids}, loss_fn


def _timm_factory(name: str) -> Callable[..., tuple]:
    def build_timm(batch: int, dtype: Any, device: str) -> tuple:
        import timm
        import torch
        import torch.nn.functional as F

        model = timm.create_model(name, pretrained=False).to(device, dtype)
        cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", {}) or {}
        size = tuple(cfg.get("input_size", (3, 224, 224)))  # native resolution (botnet26t: 256)
        images = torch.randn(batch, *size, device=device, dtype=dtype)
        labels = torch.randint(0, model.num_classes, (batch,), device=device)

        def loss_fn(out: Any) -> Any:
            return F.cross_entropy(out.float(), labels)

        return model, {"x": images}, loss_fn

    build_timm.__qualname__ = f"timm:{name}"
    return build_timm
