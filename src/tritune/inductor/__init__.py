"""torch.compile integration: harvest a model's Inductor kernels as launch specs.

Sits on top of the flow: it uses ``tritune.capture`` (``specs_from_modules``), and nothing in the
core imports it. ``harvest.harvest(model, out_dir, mode=..., batch=..., dtype=...)`` is what
``tritune harvest`` runs; ``models`` says which models it knows and the ``module:callable``
contract for any other.
"""
