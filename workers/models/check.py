"""`python -m mlcbench.workers.models.check`: a Hugging Face config (JSON on stdin) that this interpreter's
transformers cannot build as a causal LM prints why, one line; one it can build prints nothing. Exit 3 where
transformers is not installed. The orchestrator asks before a sweep (it never imports torch itself)."""

import json
import sys


def unknown_architecture(config: dict) -> str | None:
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = config.get("model_type")
    architectures = config.get("architectures") or []
    named = f"architecture {architectures[0]} (model_type {model_type!r})" if architectures \
        else f"model_type {model_type!r}"
    try:
        AutoConfig.for_model(**config)
    except (ValueError, KeyError, TypeError):
        return f"{named}: transformers {transformers.__version__} does not know it"
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return f"{named}: transformers {transformers.__version__} has no causal LM (AutoModelForCausalLM) for it"
    return None


def main() -> int:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return 3
    reason = unknown_architecture(json.loads(sys.stdin.read()))
    if reason:
        print(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
