/* Switches for the AArch64 jump-table checks (TestARM64Switches): byte,
   half and word tables, 32- and 64-bit indexes, an index offset before
   its check, switches in loops and calls around them. */
__attribute__((noinline)) int ext(int x) { return x * 3 + 1; }

__attribute__((noinline)) int small(unsigned char c) {
	switch (c) {
	case 'a': return ext(1);
	case 'b': return ext(2) + 1;
	case 'c': return 7;
	case 'd': return ext(4) ^ 3;
	case 'f': return ext(5) - 2;
	case 'g': return ext(9) * 2;
	default: return 0;
	}
}

__attribute__((noinline)) long wide(long x) {
	switch (x) {
	case 10: return ext(1);
	case 11: return ext(2);
	case 12: return ext(3) + 5;
	case 13: return ext(4) * 7;
	case 15: return ext(5) - 1;
	case 16: return ext(6) << 2;
	case 18: return ext(7);
	default: return -1;
	}
}

__attribute__((noinline)) int far(int x, int y) {
	int r = 0;
	switch (x) {
	case 0: r = ext(y); break;
	case 1: r = ext(y + 1) * ext(y); break;
	case 2: r = y * 99; break;
	case 3: { volatile char buf[300]; buf[y & 255] = 1; r = buf[3] + ext(y); break; }
	case 4: r = ext(ext(y)); break;
	case 5: r = ext(2) - y; break;
	case 6: r = ext(6) + ext(7); break;
	case 7: r = ext(8) / (y | 1); break;
	case 8: r = ext(y) % 13; break;
	case 9: r = y; break;
	case 40: r = ext(40); break;
	case 41: r = ext(41); break;
	default: r = -ext(0);
	}
	return r + 1;
}

__attribute__((noinline)) int loop(const unsigned char *p, int n) {
	int s = 0;
	for (int i = 0; i < n; i++) {
		switch (p[i] & 15) {
		case 0: s += ext(i); break;
		case 1: s -= 3; break;
		case 2: s ^= ext(s); break;
		case 3: s *= 5; break;
		case 5: s += ext(s + i); break;
		case 6: s >>= 1; break;
		case 9: s |= ext(1); break;
		case 12: return s;
		default: s++;
		}
	}
	return s;
}

__attribute__((noinline)) int nested(int a, int b) {
	switch (a) {
	case 1:
		switch (b) {
		case 1: return ext(11);
		case 2: return ext(12);
		case 3: return ext(13);
		case 4: return ext(14);
		case 5: return ext(15);
		default: return 1;
		}
	case 2: return ext(2);
	case 3: return ext(3) + b;
	case 4: return ext(4) - b;
	case 6: return ext(b);
	case 7: return b;
	default: return 0;
	}
}

int main(int argc, char **argv) {
	return small((unsigned char)argv[0][0]) + (int)wide(argc) + far(argc, 3) +
	       loop((const unsigned char *)argv[0], argc) + nested(argc, argc + 1);
}
