"""The cache doctor's verdict-accuracy suite (issue 23, item 7).

Labelled cases from two sources, scored per cause code (``_scoring.py``):

- **real recordings**: every request after the first of a recorded test run in the shared
  real-DeepSeek fixture, labelled in ``tests/fixtures/real-wire-labels.json`` (``_real.py``
  reads them, with this suite's own judgement where it differs, each with its reason);
- **generated cache killers**: the openai SDK, pydantic-ai, the OpenAI Agents SDK and
  langchain-deepseek each run a short multi-turn tool conversation against the loopback mock
  with one killer planted the way a user of that framework produces it (``_scenarios.py`` and
  one ``_fw_*.py`` module per framework), labelled by construction.
"""
