/* alpha.c */
int alpha(void) { return 0; }
