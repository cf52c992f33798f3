package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/homingdev/homing/internal/ops/inspect"
	"github.com/homingdev/homing/internal/ops/recovery"
)

// Page sizes of GET /v1/deliveries.
const (
	defaultPageSize = 50
	maxPageSize     = 500
)

// deliveryFilter reads GET /v1/deliveries' query parameters.
func deliveryFilter(r *http.Request) (inspect.Filter, error) {
	q, err := queryParams(r, "status", "webhook", "event_id", "doc_type", "doc_name", "since", "until", "cursor", "limit")
	if err != nil {
		return inspect.Filter{}, err
	}
	f, err := inspect.ParseFilter(q)
	var pe *inspect.ParamError
	if errors.As(err, &pe) {
		return f, invalidRequest(pe.Param, "%s", pe.Message)
	}
	if err != nil {
		return f, err
	}
	f.Limit = defaultPageSize
	if l, ok := q["limit"]; ok {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxPageSize {
			return f, invalidRequest("limit", "limit %q must be a whole number from 1 to %d", l, maxPageSize)
		}
		f.Limit = n
	}
	return f, nil
}

// listDeliveries is GET /v1/deliveries: newest first, a page at a time;
// next_cursor continues the listing and is null on the last page.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	f, err := deliveryFilter(r)
	if err != nil {
		return err
	}
	page, err := inspect.ListPage(r.Context(), s.cfg.DB, tenantOf(r.Context()), f)
	if errors.Is(err, inspect.ErrBadCursor) {
		return invalidRequest("cursor", "cursor %q is not one this listing returned: start again without it", f.Cursor)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// showDelivery writes delivery id with its history.
func (s *Server) showDelivery(w http.ResponseWriter, r *http.Request, status int, id string) error {
	d, err := inspect.Show(r.Context(), s.cfg.DB, tenantOf(r.Context()), id)
	if errors.Is(err, inspect.ErrNotFound) {
		return deliveryNotFound(id)
	}
	if err != nil {
		return err
	}
	if d.History == nil {
		d.History = []inspect.Attempt{}
	}
	writeJSON(w, status, d)
	return nil
}

func deliveryNotFound(id string) error {
	return notFound("delivery %q not found (GET /v1/deliveries lists them)", id)
}

func (s *Server) getDelivery(w http.ResponseWriter, r *http.Request) error {
	return s.showDelivery(w, r, http.StatusOK, r.PathValue("id"))
}

// retryDelivery is POST /v1/deliveries/{id}/retry: an Exhausted (or Failed)
// delivery becomes Failed and due now with its budget renewed, and is
// returned; the next sweep sends it. Pressing it twice queues it once: the
// sweeper's TaskID admits one retry task per delivery.
func (s *Server) retryDelivery(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	err := s.cfg.Recovery.Retry(r.Context(), tenantOf(r.Context()), id)
	switch {
	case errors.Is(err, recovery.ErrNotFound):
		return deliveryNotFound(id)
	case errors.Is(err, recovery.ErrDelivered):
		return conflict("delivery %q was delivered; POST /v1/deliveries/%s/resend sends its payload again as a new delivery", id, id)
	case errors.Is(err, recovery.ErrInFlight):
		return conflict("delivery %q has an attempt in flight; try again once it is recorded", id)
	case errors.Is(err, recovery.ErrNotBuilt):
		return conflict("%s", err.Error())
	case err != nil:
		return err
	}
	return s.showDelivery(w, r, http.StatusOK, id)
}

// resendDelivery is POST /v1/deliveries/{id}/resend: a new delivery of the
// frozen payload, 201 with its Location; the next sweep sends it. With an
// Idempotency-Key header, repeating the request returns the same new
// delivery (200) instead of making another.
func (s *Server) resendDelivery(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var (
		newID   string
		created = true
		err     error
	)
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		newID, created, err = s.cfg.Recovery.ResendOnce(r.Context(), tenantOf(r.Context()), id, key)
	} else {
		newID, err = s.cfg.Recovery.Resend(r.Context(), tenantOf(r.Context()), id)
	}
	switch {
	case errors.Is(err, recovery.ErrNotFound):
		return deliveryNotFound(id)
	case errors.Is(err, recovery.ErrInvalidKey):
		return invalidRequest("Idempotency-Key", "Idempotency-Key %s", strings.TrimPrefix(err.Error(), recovery.ErrInvalidKey.Error()+": "))
	case errors.Is(err, recovery.ErrNotBuilt):
		return conflict("%s", err.Error())
	case err != nil:
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/deliveries/"+newID)
	}
	return s.showDelivery(w, r, status, newID)
}
