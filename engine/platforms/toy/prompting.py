"""What the agents' prompts say about toy kernels: the registry's "prompts" part for the toy language."""

from __future__ import annotations

from typing import Any

from engine.agents.prompting import LanguagePrompts


def toy_rules(cpu: Any) -> list[str]:
    return [f"# Toy rules ({cpu.name})",
            f"- A kernel is a numpy function; each bytecode instruction costs {cpu.microseconds_per_instruction:g} us."]


PROMPTS = LanguagePrompts(rules=toy_rules, standard_imports=(("np", "import numpy as np"),))
