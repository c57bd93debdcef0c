"""Adapters for agents written with an agent framework (docs/API.md): each turns an agent of
that framework into a loop-level agent (`run(episode)`), so that a `py:MODULE:FACTORY` spec
can return it. Each module needs its framework's extra (`[agents-sdk]`, `[langgraph]`);
without it, building an adapter raises `MissingExtra` naming the pip command."""
