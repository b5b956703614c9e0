"""MemGPT-style memory tools: functions an LLM calls to page its own memory.

:func:`openai_tools` and :func:`anthropic_tools` give the function schemas in each
provider's format; :class:`MemoryTools` applies a model's call to the task's stores with the
library's checks and answers it (:class:`ToolResult`). The signal that tells a model to use
them is the package's :attr:`~agent_engine.assembler.package.ContextPackage.pressure`.
"""

from agent_engine.tools.apply import MemoryTools, ToolCall, ToolResult
from agent_engine.tools.schemas import SPECS, ToolSpec, anthropic_tools, openai_tools

__all__ = [
    "MemoryTools",
    "SPECS",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "anthropic_tools",
    "openai_tools",
]
