"""The agent roles of an optimization run (Planner, Executor, Fixer, Summarizer). Pure Python, no Django.

    base.py        request/response records shared with `engine.search`; `CallRecord` = one AgentCall row
    llm.py         `LLMClient`: the `openai` AsyncOpenAI client with per-role settings, concurrency limit,
                   retries with backoff, token usage and cost (price table passed in)
    llm_agents.py  `LLMAgents`: the four roles over `LLMClient`, prompt templates and reply parsing
    prompting.py   renders `prompts/*.md` with the problem, kernel, profile (with meanings), hardware rules, memory
    parsing.py     robust reply parsing: last fenced Python block, plans (numbered list or JSON), memory summaries
    offline.py     `OfflineAgents`: deterministic search over the rewrite catalog, for runs with no endpoint
    rewrites/      the catalog of named AST rewrites of NKI kernels (one module per kind of rewrite)

Choosing agents for a run (the Django layer does this from settings):

    agents = OfflineAgents()                                    # no endpoint configured
    agents = LLMAgents(LLMClient({"planner": RoleSettings(model=..., base_url=..., api_key=...), ...},
                                 prices={"model": (usd_per_m_input, usd_per_m_output)}))
"""
