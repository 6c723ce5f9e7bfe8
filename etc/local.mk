# etc: filled in by its issue
