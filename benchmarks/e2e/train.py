"""One training program per model, as a user writes it: the program `tritune optimize` runs.

    python3 benchmarks/e2e/train.py gpt2 --steps 3 [--mode default|coordinate_descent|max_autotune]
    tritune optimize --out runs/gpt2 -- python3 benchmarks/e2e/train.py gpt2 --steps 3

Random weights, nothing downloaded (transformers configs, timm with pretrained=False); fixed seeds
and a fixed set of batches, so two processes train on the same data from the same weights. The
model and its loss are one module, compiled with torch.compile in the chosen mode (the backward
too, through AOTAutograd); the optimizer (fused AdamW) runs eagerly, as in most training scripts.

| model | what | precision | batch |
|---|---|---|---|
| ``bert`` | ``BertForMaskedLM(BertConfig(attn_implementation="eager"))``, labels = the input ids | fp32 weights and activations, TF32 matmuls (``set_float32_matmul_precision("high")``) | 16 x 128 tokens |
| ``resnet50`` | ``timm.create_model("resnet50")``, channels-last, cross-entropy on random labels | bf16 autocast (fp32 weights) | 64 x 3 x 224 x 224 |
| ``vit_base_patch16_224`` | timm, cross-entropy on random labels | bf16 autocast | 32 x 3 x 224 x 224 |
| ``gpt2`` | ``GPT2LMHeadModel(GPT2Config())`` (124M, sdpa attention), labels = the input ids | bf16 autocast | 8 x 512 tokens |
| ``llama`` | ``LlamaForCausalLM(LlamaConfig(**LLAMA))``: hidden 1024, 8 layers, 16 heads, MLP 2816, vocab 32000 (~170M, sdpa attention, rotary embeddings, RMSNorm, SwiGLU), labels = the input ids | bf16 autocast | 8 x 1024 tokens |
| ``tiny`` | a two-layer MLP with LayerNorm, for the CPU tests (``--device cpu --mode eager``) | fp32 | 8 x 32 |

Modes: ``default`` is ``torch.compile(m)``; ``coordinate_descent`` is ``torch.compile(m,
options={"coordinate_descent_tuning": True})`` (Inductor tunes every kernel's config at its first
launch); ``max_autotune`` is ``torch.compile(m, mode="max-autotune-no-cudagraphs")`` (which also
turns coordinate descent on and autotunes matmul templates); ``eager`` compiles nothing.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import time
from typing import Any, Callable

SEED = 0
DATA_BATCHES = 4  # step i trains on batch i % 4: a fixed, repeatable data stream
LR = 1e-4
MODES = ("default", "coordinate_descent", "max_autotune", "eager")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    what: str
    precision: str  # "fp32", "tf32" (fp32 with TF32 matmuls) or "bf16" (autocast)
    batch: int
    build: Callable[[int, str], tuple]  # (batch, device) -> (module returning the loss, make_batch(generator))


def _with_loss(inner: Any, loss_of: Callable[[Any, Any], Any]) -> Any:
    """``inner`` and its loss as one module, so that torch.compile sees the loss too."""
    import torch

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, batch):
            return loss_of(self.inner, batch)

    return WithLoss()


def _language_model_loss(model: Any, ids: Any) -> Any:
    return model(input_ids=ids, labels=ids).loss  # next-token (GPT-2) / masked-token (BERT) loss on the ids


def _classifier_loss(model: Any, batch: tuple) -> Any:
    import torch.nn.functional as F

    images, labels = batch
    return F.cross_entropy(model(images).float(), labels)


def _tokens(vocab: int, batch: int, length: int, device: str) -> Callable[[Any], Any]:
    def make(gen: Any) -> Any:
        import torch

        return torch.randint(0, vocab, (batch, length), generator=gen, device=device)

    return make


def _bert(batch: int, device: str) -> tuple:
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(attn_implementation="eager")  # eager: the explicit softmax kernels (TorchBench's BERT)
    return _with_loss(BertForMaskedLM(config), _language_model_loss), _tokens(config.vocab_size, batch, 128, device)


def _gpt2(batch: int, device: str) -> tuple:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(attn_implementation="sdpa", use_cache=False)
    return _with_loss(GPT2LMHeadModel(config), _language_model_loss), _tokens(config.vocab_size, batch, 512, device)


# Issue 24's Llama-style decoder: a config, never a download. Only keys every LlamaConfig since
# transformers 4.x takes; the rest (rope, RMSNorm eps, no bias, untied embeddings) stay its defaults.
LLAMA = {"vocab_size": 32000, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
         "num_attention_heads": 16, "num_key_value_heads": 16, "max_position_embeddings": 2048}
LLAMA_TOKENS = 1024


def _llama(batch: int, device: str) -> tuple:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**LLAMA, use_cache=False, attn_implementation="sdpa")  # as GPT-2's
    return _with_loss(LlamaForCausalLM(config), _language_model_loss), \
        _tokens(config.vocab_size, batch, LLAMA_TOKENS, device)


def _timm(name: str) -> Callable[[int, str], tuple]:
    def build(batch: int, device: str) -> tuple:
        import timm
        import torch

        model = timm.create_model(name, pretrained=False)
        layout = torch.channels_last if name.startswith("resnet") else torch.contiguous_format

        def make(gen: Any) -> tuple:
            images = torch.randn(batch, 3, 224, 224, generator=gen, device=device).contiguous(memory_format=layout)
            return images, torch.randint(0, model.num_classes, (batch,), generator=gen, device=device)

        return _with_loss(model.to(memory_format=layout), _classifier_loss), make

    return build


def _tiny(batch: int, device: str) -> tuple:
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.GELU(), torch.nn.Linear(64, 10))

    def make(gen: Any) -> tuple:
        return (torch.randn(batch, 32, generator=gen, device=device),
                torch.randint(0, 10, (batch,), generator=gen, device=device))

    return _with_loss(net, _classifier_loss), make


MODELS = {spec.name: spec for spec in (
    ModelSpec("bert", "BertForMaskedLM (transformers config, eager attention), 16 x 128 tokens", "tf32", 16, _bert),
    ModelSpec("resnet50", "timm resnet50, channels-last, 64 x 224 x 224", "bf16", 64, _timm("resnet50")),
    ModelSpec("vit_base_patch16_224", "timm vit_base_patch16_224, 32 x 224 x 224", "bf16", 32,
              _timm("vit_base_patch16_224")),
    ModelSpec("gpt2", "GPT2LMHeadModel(GPT2Config()), 124M, sdpa attention, 8 x 512 tokens", "bf16", 8, _gpt2),
    ModelSpec("llama", "LlamaForCausalLM (hidden 1024, 8 layers, 16 heads, vocab 32000, transformers config), "
              "sdpa attention, 8 x 1024 tokens", "bf16", 8, _llama),
    ModelSpec("tiny", "a two-layer MLP (CPU tests)", "fp32", 8, _tiny),
)}


class Trainer:
    """A model, its optimizer and its data; ``step(i)`` is one training step on batch i % 4."""

    def __init__(self, name: str, mode: str = "default", *, device: str = "cuda"):
        import torch

        if name not in MODELS:
            raise SystemExit(f"train.py: unknown model {name!r}; one of {', '.join(MODELS)}")
        if mode not in MODES:
            raise SystemExit(f"train.py: unknown mode {mode!r}; one of {', '.join(MODES)}")
        self.spec, self.mode, self.device = MODELS[name], mode, device
        torch.manual_seed(SEED)
        if self.spec.precision == "tf32":
            torch.set_float32_matmul_precision("high")
        module, make = self.spec.build(self.spec.batch, device)
        self.module = module.to(device).train()
        gen = torch.Generator(device=device).manual_seed(SEED)
        self.batches = [make(gen) for _ in range(DATA_BATCHES)]
        self.optimizer = torch.optim.AdamW(self.module.parameters(), lr=LR, fused=device.startswith("cuda"))
        self.params = sum(p.numel() for p in self.module.parameters())
        self.compiled = _compile(self.module, mode)

    def step(self, i: int) -> Any:
        """One step; returns the loss as a tensor (no host sync: the caller decides when)."""
        import torch

        with torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16, enabled=self.spec.precision == "bf16"):
            loss = self.compiled(self.batches[i % DATA_BATCHES])
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def snapshot(self) -> tuple:
        """Weights, optimizer state and RNG (dropout) now, for ``restore``: two runs from one state."""
        import torch

        rng = torch.cuda.get_rng_state() if self.device.startswith("cuda") else None
        return copy.deepcopy(self.module.state_dict()), copy.deepcopy(self.optimizer.state_dict()), \
            torch.get_rng_state(), rng

    def restore(self, snap: tuple) -> None:
        import torch

        weights, optimizer, cpu_rng, device_rng = snap
        self.module.load_state_dict(weights)  # copies in place: the compiled graph keeps its tensors
        self.optimizer.load_state_dict(copy.deepcopy(optimizer))
        torch.set_rng_state(cpu_rng)
        if device_rng is not None:
            torch.cuda.set_rng_state(device_rng)

    def sync(self) -> None:
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize()


def _compile(module: Any, mode: str) -> Any:
    import torch

    if mode == "eager":
        return module
    if mode == "coordinate_descent":
        return torch.compile(module, options={"coordinate_descent_tuning": True})
    if mode == "max_autotune":
        return torch.compile(module, mode="max-autotune-no-cudagraphs")
    return torch.compile(module)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--mode", choices=MODES, default="default")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    trainer = Trainer(args.model, args.mode, device=args.device)
    print(f"{args.model}: {trainer.spec.what}; {trainer.params / 1e6:.1f}M parameters; {trainer.spec.precision}; "
          f"mode {args.mode}", flush=True)
    for i in range(args.steps):
        start = time.perf_counter()
        loss = trainer.step(i)
        trainer.sync()
        print(f"step {i}: loss {loss.item():.5f}  {1e3 * (time.perf_counter() - start):.1f} ms", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
