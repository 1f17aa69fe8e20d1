package dedupe

import "testing"

func TestQueueNamespaceSplitsBackIntoRouteAndDestination(t *testing.T) {
	for _, c := range []struct{ route, destination, namespace string }{
		{"orders", DefaultDestination, "orders"},
		{"orders", "billing", "orders\x00@billing"},
		{"a/b@c", "x-1_y", "a/b@c\x00@x-1_y"},
	} {
		if got := QueueNamespace(c.route, c.destination); got != c.namespace {
			t.Errorf("QueueNamespace(%q, %q) = %q, want %q", c.route, c.destination, got, c.namespace)
		}
		if r, d := SplitQueueNamespace(c.namespace); r != c.route || d != c.destination {
			t.Errorf("SplitQueueNamespace(%q) = %q, %q", c.namespace, r, d)
		}
	}
}

func TestDestinationNamesAreShortWords(t *testing.T) {
	for _, ok := range []string{"billing", "new-service", "v2_shadow", "A", "0", "abcdefghijabcdefghijabcdefghij12"} {
		if err := CheckDestinationName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", "_x", "a b", "a/b", "a.b", "é", "x\x00", "abcdefghijabcdefghijabcdefghij123"} {
		if err := CheckDestinationName(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
