"""The vLLM family: vLLM's speculative decoding audited against the exact law, on a CPU.

* `dsi_ref.backends.vllm.models`: tiny Llama checkpoints built in code (target, drafters, an
  EAGLE head) and their float64 logits;
* `dsi_ref.backends.vllm.sampling`: vLLM's sampling settings and the exact law they define;
* `dsi_ref.backends.vllm.patches`: the CPU expand shim as released, half fixed and fixed
  (vllm-project/vllm#55005);
* `dsi_ref.backends.vllm.engine` and `.worker`: one engine configuration in a process of its own;
* `dsi_ref.backends.vllm.matrix`: the matrix of methods × sampling settings × draft lengths;
* `dsi_ref.backends.vllm.kernel`: vLLM's rejection sampler called directly on synthetic rows.

Only this family imports vllm, and only inside the engine's process (`worker`) and the kernel
audit; the rest runs wherever torch and transformers are installed.
"""
