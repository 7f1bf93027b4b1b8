"""Reading SQL text: the first pass, and the sqlglot helpers every later pass uses.

- `lexer`: PostgreSQL's own lexical rules, cross-checked against sqlglot's tokens.
- `lexical`: the session settings that change how text is read (pinned or refused).
- `positions`: error positions in the client's text.
- `scopes`: which table references name a CTE.
- `functions`: functions refused, or allowed on private rows.
- `nodes`: wrappers stripped, output names as PostgreSQL gives them, number literals.
"""
