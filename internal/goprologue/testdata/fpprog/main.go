// Command fpprog calls functions of the shapes that goprologue's tests
// check: frameless leaves, small and large frames, several epilogues, a
// switch that compiles to a jump table, a deferred recover that returns
// through the deferreturn block, a panic path, a method value wrapper and
// a closure. Each is called a few times with arguments from the command
// line so that the compiler cannot fold them.
package main

import (
	"fmt"
	"os"
	"strconv"
)

//go:noinline
func leaf(a, b int) int { return a*b + 3 }

//go:noinline
func small(x int) int {
	if x > 10 {
		return leaf(x, 2)
	}
	return x
}

//go:noinline
func big(n int) int {
	var buf [5000]byte
	for i := range buf {
		buf[i] = byte(i * n)
	}
	s := 0
	for _, b := range buf {
		s += int(b)
	}
	return s + small(s)
}

//go:noinline
func jump(x int) int {
	switch x {
	case 0:
		return small(x + 1)
	case 1:
		return leaf(x, 7)
	case 2:
		return small(x * 11)
	case 3:
		return big(x)
	case 4:
		return leaf(x, x)
	case 5:
		return small(x + 20)
	case 6:
		return x * 9
	case 7:
		return small(x - 1)
	}
	return -1
}

//go:noinline
func recovering(x int) (r int, err error) {
	defer func() {
		if e := recover(); e != nil {
			err = fmt.Errorf("recovered: %v", e)
			r = -x
		}
	}()
	if x%2 == 1 {
		panic("odd")
	}
	return small(x), nil
}

//go:noinline
func index(s []int, i int) int {
	if i > 100 {
		panic(fmt.Sprint("too far: ", i))
	}
	return s[i] + small(i)
}

type counter struct{ n int }

//go:noinline
func (c *counter) add(x int) int {
	c.n += small(x)
	return c.n
}

//go:noinline
func apply(f func(int) int, x int) int { return f(x) + 1 }

func main() {
	n := len(os.Args)
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	s := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	c := &counter{}
	total := 0
	for i := 0; i < 10; i++ {
		r, err := recovering(n + i)
		total += r + jump((n+i)%9) + index(s, (n+i)%12) + apply(c.add, i)
		if err != nil {
			total++
		}
		k := 3 * i
		total += apply(func(v int) int { return v + k + big(v) }, i)
	}
	fmt.Println(total, c.n, leaf(n, 3))
}
