"""The study that reproduces and extends the paper: the Table 1 ablation, the attention curve, the
probes, the pictures, masked-LM adaptation and the paired bootstrap. Nothing in the runtime, the
evaluation or the `parse` command imports this package; it needs the `probe` and `viz` extras."""
