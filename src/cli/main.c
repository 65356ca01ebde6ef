/* main.c — placeholder entry point until the CLI lands. */
int main(void) { return 0; }
