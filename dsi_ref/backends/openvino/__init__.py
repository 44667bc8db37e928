"""The OpenVINO GenAI family: ``openvino_genai.LLMPipeline``'s speculative decoding audited
against the exact law, on a CPU.

* `dsi_ref.backends.openvino.models`: the vLLM family's tiny Llama checkpoints converted to
  OpenVINO IR (optimum-intel, openvino-tokenizers), cached by digest;
* `dsi_ref.backends.openvino.sampling`: GenAI's sampling settings in its own order, and the exact
  law they define on the first tokens;
* `dsi_ref.backends.openvino.engine` and `.worker`: one pipeline in a process of its own;
* `dsi_ref.backends.openvino.matrix`: the matrix of modes × sampling settings × draft lengths.

Only this family imports openvino, openvino_genai, openvino_tokenizers and optimum, and only
inside functions (the conversion) and inside the engine's process (`worker`).
"""
