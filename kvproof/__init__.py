"""kvproof: a model-checked specification of the PD-disaggregated KV page lifecycle."""
