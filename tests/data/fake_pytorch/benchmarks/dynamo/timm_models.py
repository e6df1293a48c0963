"""Stand-in for benchmarks/dynamo/timm_models.py (see common.py): the same two tiny real models
as the torchbench stand-in, under the other suite's script name and model list."""
import sys

from common import main
from torchbench import MODELS

if __name__ == "__main__":
    # the real harness's accuracy-mode default for timm models (common.py) is 8
    sys.exit(main(MODELS, {name: 8 for name in MODELS}))
