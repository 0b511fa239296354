"""The prompt model: what DeepSeek does with a prompt, below both the mock and the doctor.

A request is rendered to tokens as DeepSeek's chat template renders it
(:class:`PromptRenderer`, over a :class:`Tokenizer`), and the prefix cache decides what of those
tokens it had seen (:class:`PrefixCacheSimulator`, in whole cache units). The mock answers with
these figures; the cache doctor replays them to explain a loss; ``dsh-testkit calibrate``
holds them against live usage (docs/fidelity.md). The one wire view every comparison reads
(the prompt's parts as the template renders them) lives here too.
"""

from dsh_core.providers import UnitVisibility

from ._cache import PrefixCacheSimulator
from ._cache_values import CacheKey, CacheUsage
from ._granularity import CacheGranularity
from ._template import PromptRenderer
from ._tokenizers import DeepSeekTokenizer, HeuristicTokenizer, Tokenizer

__all__ = [
    "CacheGranularity",
    "CacheKey",
    "CacheUsage",
    "DeepSeekTokenizer",
    "HeuristicTokenizer",
    "PrefixCacheSimulator",
    "PromptRenderer",
    "Tokenizer",
    "UnitVisibility",
]
