// C++ end-to-end test program: exceptions through several frames, virtual
// calls, templates.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

struct Shape {
	virtual ~Shape() {}
	virtual int area() const = 0;
};
struct Sq : Shape {
	int s;
	explicit Sq(int s) : s(s) {}
	int area() const override { return s * s; }
};

template <typename T> T deep(int n, T v) {
	if (n == 0)
		throw std::runtime_error("bottom " + std::to_string(v));
	return deep<T>(n - 1, v + 1) + 1;
}

int main() {
	std::vector<Shape *> v;
	for (int i = 1; i <= 4; i++)
		v.push_back(new Sq(i));
	int total = 0;
	for (auto *s : v)
		total += s->area();
	try {
		deep<long>(8, 1);
	} catch (const std::exception &e) {
		std::printf("caught %s, total %d\n", e.what(), total);
	}
	for (auto *s : v)
		delete s;
	return 0;
}
