# man: filled in by its issue
