package lockstate

import (
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	d := newDriver(t)
	a, b := d.session(), d.session()
	r1 := d.acquire(a, "db/orders", Write, 0)
	if r1.Status != Granted || r1.Token != 3 {
		t.Fatalf("first acquire: %+v", r1)
	}
	if r := d.acquire(b, "db/orders/42", Read, 0); r.Status != TimedOut {
		t.Fatalf("child under held parent: %+v", r)
	}
	r2 := d.acquire(b, "db/orders/42", Read, time.Minute)
	if r2.Status != Pending {
		t.Fatalf("queued: %+v", r2)
	}
	res := d.release(a, "db/orders")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if st := d.status(r2.ID); st != Granted {
		t.Fatalf("after release: %s", st)
	}
	got, _ := d.request(r2.ID)
	if got.Token != d.index {
		t.Fatalf("token %d, want %d", got.Token, d.index)
	}
	t.Logf("events: %+v", res.Events)
}
