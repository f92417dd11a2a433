package builtin

// timeHeap is a min-heap of event times: the fire times of the window and
// join operators' timer queues (one entry per distinct time).
type timeHeap []int64

func (h *timeHeap) push(t int64) {
	s := append(*h, t)
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
	*h = s
}

// popDue removes and returns the earliest time if it is at or before wm.
func (h *timeHeap) popDue(wm int64) (int64, bool) {
	s := *h
	if len(s) == 0 || s[0] > wm {
		return 0, false
	}
	at := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && s[r] < s[l] {
			l = r
		}
		if s[i] <= s[l] {
			break
		}
		s[i], s[l] = s[l], s[i]
		i = l
	}
	*h = s
	return at, true
}
