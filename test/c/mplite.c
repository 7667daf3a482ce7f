/* MP_Lite's C API over Ethervia's libmplite: every function, with results
 * checked here (a mismatch exits 1) and printed as "M<rank> ..." lines.
 * Any number of ranks >= 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mplite.h"

static int me, np;

static void want(int ok, const char *what) {
	if (!ok) {
		fprintf(stderr, "M%d FAIL %s\n", me, what);
		exit(1);
	}
}

int main(int argc, char **argv) {
	MP_Init(&argc, &argv);
	MP_Nprocs(&np);
	MP_Myproc(&me);
	double t0 = MP_Time();
	int next = (me + 1) % np, prev = (me + np - 1) % np;

	/* ring of blocking sends/receives, small and large */
	int n = 300000;
	char *s = malloc(n), *r = malloc(n);
	for (int i = 0; i < n; i++) s[i] = (char)(me * 31 + i);
	int id;
	MP_ARecv(r, n, prev, 4, &id);
	MP_Send(s, n, next, 4);
	MP_Wait(&id);
	int src, tag, len, bad = 0;
	MP_Get_Last_Source(&src);
	MP_Get_Last_Tag(&tag);
	MP_Get_Last_Size(&len);
	for (int i = 0; i < n; i++) bad += r[i] != (char)(prev * 31 + i);
	want(src == prev && tag == 4 && len == n && bad == 0, "ring large");
	int x = me * 10, y = -1;
	MP_ASend(&x, sizeof x, next, 5, &id);
	MP_Recv(&y, sizeof y, -1, 5);
	MP_Wait(&id);
	MP_Get_Last_Source(&src);
	want(y == prev * 10 && src == prev, "ring small any source");
	printf("M%d ring ok: from %d got %d\n", me, src, y);

	MP_Sync();
	double b[3] = {0, 0, 0};
	if (me == np - 1) b[0] = 1.5, b[1] = 2.5, b[2] = -3;
	MP_Bcast(b, sizeof b, np - 1);
	want(b[0] == 1.5 && b[1] == 2.5 && b[2] == -3, "bcast");

	double d[2] = {me + 1.0, -me};
	MP_dSum(d, 2);
	want(d[0] == np * (np + 1) / 2.0 && d[1] == -(np * (np - 1) / 2.0), "dSum");
	int iv[2] = {me, 1};
	MP_iSum(iv, 2);
	want(iv[0] == np * (np - 1) / 2 && iv[1] == np, "iSum");
	double mx = me * 2.0, mn = me * 2.0;
	MP_dMax(&mx, 1);
	MP_dMin(&mn, 1);
	want(mx == 2.0 * (np - 1) && mn == 0, "dMax/dMin");
	double t1 = MP_Time();
	want(t1 >= t0, "MP_Time");
	printf("M%d ok: np %d bcast %.1f dsum %.1f isum %d max %.1f min %.1f\n", me, np, b[1], d[0], iv[0], mx, mn);
	MP_Finalize();
	return 0;
}
