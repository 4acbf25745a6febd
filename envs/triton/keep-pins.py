"""Print a pip constraints file: `name==version` of the image's own packages that pip must not replace."""

from importlib import metadata

for name in ("torch", "transformers", "tensorrt", "tensorrt_llm", "pydantic", "numpy"):
    try:
        print(f"{name}=={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        pass
