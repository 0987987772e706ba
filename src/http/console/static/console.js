// Live updates of a run page: follow the run's event stream (SSE, same origin,
// the session cookie authenticates it) and re-render the live part of the page
// through htmx on every event. No inline script anywhere: the CSP forbids it.
(function () {
  'use strict';
  var live = document.getElementById('live');
  // A run read from the archive has no stream to follow (data-events absent): it cannot change.
  var events = live && live.getAttribute('data-events');
  if (!events || !window.EventSource) return;
  var fragment = live.getAttribute('data-live');
  var pending = null;
  // A person typing in a form of the live part (a retry's extension, a finding's receipt or
  // note) must not see it wiped by a re-render: while a field there was edited, updates wait.
  // The person is told the page stopped following the run (#live-held), and the page says so to
  // whatever reads it (body data-live="held").
  var editing = false;
  var note = document.getElementById('live-held');
  function hold() {
    if (note) note.hidden = false;
    document.body.setAttribute('data-live', 'held');
  }
  live.addEventListener('input', function () {
    editing = true;
  });
  // A re-render already scheduled or in flight when the typing began is dropped too: its answer
  // would replace the field being filled.
  live.addEventListener('htmx:beforeSwap', function (evt) {
    if (!editing) return;
    evt.detail.shouldSwap = false;
    hold();
  });
  function refresh() {
    if (editing) return hold();
    // Many events arrive together (a step commit emits several): one re-render for them.
    if (pending) return;
    pending = setTimeout(function () {
      pending = null;
      if (editing) return hold();
      if (window.htmx) window.htmx.ajax('GET', fragment, { target: '#live', swap: 'innerHTML' });
    }, 150);
  }
  var source = new EventSource(events);
  ['status_changed', 'step_committed', 'decision', 'operator_action', 'effect', 'ledger'].forEach(function (type) {
    source.addEventListener(type, refresh);
  });
  source.onmessage = refresh;
  document.body.setAttribute('data-live', 'on');
})();
