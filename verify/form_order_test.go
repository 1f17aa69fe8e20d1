package verify

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The walker orders pairs by an 8-byte name prefix before the whole name: names that share
// it, that are shorter than it, that hold NUL bytes (a zero-padded prefix ties with them), and
// forms past the insertion sort's size still sign what url.ParseQuery and a sort sign.
func TestFormParamsOrderMatchesParseQueryAtPrefixEdges(t *testing.T) {
	for _, body := range []string{
		"a%00=1&a=1&a%00%00=1&a%01=1&%00=1&=1&a%00b=1",
		"ToCountry=US&ToCountr=x&ToCountr%00=y&ToCountryX=z&ToCountr%FF=w&ToCountry=UT&ToCountry=US",
		"MessageSid=1&MessagingServiceSid=2&MessageSi=3&MessageSidZ=4&MessageS=5&Message=6",
		"%FF%FF%FF%FF%FF%FF%FF%FF=1&%FF%FF%FF%FF%FF%FF%FF%FF%00=1&%FF%FF%FF%FF%FF%FF%FF=1",
		"k%00%00%00%00%00%00%00=1&k=1&k%00%00%00%00%00%00%00%00=1&k%00%00%00%00%00%00=1",
	} {
		checkSameParams(t, body)
	}
	// More pairs than the insertion sort takes, shuffled, many sharing a prefix or a name.
	r := rand.New(rand.NewPCG(8, 32))
	names := []string{"ReferralNumMedia", "ReferralNumMediaX", "Referral", "Referra", "R", "R%00", "SmsSid", "SmsSid%00"}
	for _, pairs := range []int{33, 40, 200} {
		parts := make([]string, pairs)
		for i := range parts {
			parts[i] = fmt.Sprintf("%s=%d", names[r.IntN(len(names))], r.IntN(5))
		}
		checkSameParams(t, strings.Join(parts, "&"))
	}
}
