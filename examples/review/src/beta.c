/* beta.c */
int beta(void) {
  /* TODO: handle errors */
  return 0;
}
