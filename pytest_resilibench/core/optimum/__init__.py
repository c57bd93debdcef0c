"""The exact optimum of a task: its MDP (`mdp.py`), solved by backward induction (`dp.py`), and
the realistic profile's MDP and solution (`realistic.py`). numpy only, never torch.

It is part of the benchmark's model, not of the fixture factory: at run time the oracle agent
plays the optimal policy and the prompts need the optimal plan of a task that has no stored
one (user tasks, custom registries, the realistic profile's stand-ins). `solver/` imports it to
write the fixtures (docs/ARCHITECTURE.md).
"""
