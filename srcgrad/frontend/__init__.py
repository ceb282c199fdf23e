"""Frontend: Python source → gast AST → fence → IR graph."""
