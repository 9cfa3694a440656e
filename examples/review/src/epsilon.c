/* epsilon.c */
int epsilon(void) { return 0; }
