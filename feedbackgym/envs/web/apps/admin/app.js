// Backoffice: sign in, find an order, refund some of its lines (confirmed in a dialog),
// keep an internal note, set the order's status and notify the customer.
// The staff account and the orders come from the episode's instance.
(function () {
  "use strict";
  const { h, link, button, message, textField, selectField, checkboxField, money } = kit;

  const order = (s, id) => s.orders.find((o) => o.id === id);
  const remaining = (o, i) => o.lines[i].qty - o.refunds.reduce((n, r) => n + (r.lines[i] || 0), 0);
  const day = (date) => {
    const [y, m, d] = date.split("-").map(Number);
    return `${d} ${["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][m - 1]} ${y}`;
  };
  const total = (o) => o.lines.reduce((sum, l) => sum + l.qty * l.price, 0);
  const touch = (s, o) => { if (!s.touched.includes(o.id)) s.touched.push(o.id); };

  function page(s, title, ...content) {
    return {
      title,
      body: h("div", {},
        h("header", {},
          h("span", { class: "brand" }, "Backoffice"),
          s.signedIn ? link("/orders", "Orders", { "data-key": "orders-link" }) : null,
          s.signedIn ? button("Sign out", () => kit.update(() => { s.signedIn = false; kit.go("/login"); }),
            { class: "linklike", "data-key": "sign-out" }) : null),
        h("main", {}, h("h1", {}, title), ...content)),
    };
  }

  function login(s) {
    if (s.signedIn) return kit.redirect("/orders");
    const signIn = () => kit.update(() => {
      const ok = (s.form.username || "").trim() === s.staff.username && s.form.password === s.staff.password;
      s.loginError = ok ? "" : "Wrong username or password.";
      if (ok) {
        s.signedIn = true;
        kit.go("/orders");
      }
    });
    return page(s, "Sign in",
      message(s.loginError, "error"),
      textField({ key: "username", label: "Username" }),
      textField({ key: "password", label: "Password", type: "password" }),
      button("Sign in", signIn, { class: "primary", "data-key": "sign-in" }));
  }

  function listUrl(changes) {
    const params = new URLSearchParams(window.location.search);
    for (const [k, v] of Object.entries(changes)) {
      if (v) params.set(k, v);
      else params.delete(k);
    }
    const query = params.toString();
    return query ? `/orders?${query}` : "/orders";
  }

  function orders(s) {
    if (!s.signedIn) return kit.redirect("/login");
    const q = (kit.query("q") || "").toLowerCase();
    const status = kit.query("status") || "";
    const pageNo = Number(kit.query("page") || "1");
    const found = s.orders.filter((o) =>
      (!q || o.id.includes(q) || o.customer.toLowerCase().includes(q) || o.email.includes(q)) &&
      (!status || o.status === status));
    const pages = Math.max(1, Math.ceil(found.length / s.pageSize));
    const shown = found.slice((pageNo - 1) * s.pageSize, pageNo * s.pageSize);
    return page(s, "Orders",
      h("div", { class: "row" },
        h("input", {
          type: "search", id: "order-search", "aria-label": "Search orders by number, customer or email",
          value: s.form["order-search"] || "",
          oninput: (e) => { s.form["order-search"] = e.target.value; },
        }),
        button("Search", () => kit.go(listUrl({ q: (s.form["order-search"] || "").trim(), page: "" })),
          { "data-key": "order-search-go" })),
      selectField({
        key: "status-filter", label: "Status", placeholder: "Any status", value: status,
        options: s.statuses.map((x) => [x, x]), onchange: (v) => kit.go(listUrl({ status: v, page: "" })),
      }),
      h("p", { class: "muted", role: "status" }, `${found.length} orders, page ${pageNo} of ${pages}`),
      h("table", {}, h("tbody", {}, shown.map((o) => h("tr", {},
        h("td", {}, link(`/orders/${o.id}`,
          `#${o.id} - ${o.customer} - ${day(o.date)} - ${money(total(o))} - ${o.status}`,
          { "data-key": `order-${o.id}` })))))),
      kit.pager(pageNo, pages, (page) => listUrl({ page })));
  }

  function refundForm(s, o) {
    const f = s.form;
    const qty = (i) => Number(f[`refund-qty-${i}`] || "0");
    const issue = () => kit.update(() => {
      const amount = o.lines.reduce((sum, l, i) => sum + qty(i) * l.price, 0);
      if (!amount) s.notice = { kind: "error", text: "Choose a quantity to refund." };
      else if (!f["refund-reason"]) s.notice = { kind: "error", text: "Choose a reason for the refund." };
      else {
        s.notice = null;
        s.dialog = { order: o.id, amount };
      }
    });
    return [
      h("h2", {}, "Refund"),
      o.lines.map((l, i) => selectField({
        key: `refund-qty-${i}`, label: `Refund quantity of ${l.name} (${remaining(o, i)} left)`,
        placeholder: null,
        options: Array.from({ length: remaining(o, i) + 1 }, (_, n) => [String(n), String(n)]),
      })),
      selectField({ key: "refund-reason", label: "Reason", options: s.reasons.map((r) => [r, r]) }),
      checkboxField({ key: "restock", label: "Put refunded items back in stock" }),
      button("Issue refund", issue, { "data-key": "issue-refund" }),
    ];
  }

  function confirmDialog(s, o) {
    const f = s.form;
    const confirm = () => kit.update(() => {
      const lines = {};
      o.lines.forEach((l, i) => {
        const n = Number(f[`refund-qty-${i}`] || "0");
        if (n) lines[i] = n;
      });
      o.refunds.push({ lines, reason: f["refund-reason"], restock: Boolean(f.restock), amount: s.dialog.amount });
      touch(s, o);
      s.notice = { kind: "info", text: `Refund of ${money(s.dialog.amount)} issued.` };
      s.dialog = null;
      o.lines.forEach((_, i) => { f[`refund-qty-${i}`] = "0"; });
      f["refund-reason"] = "";
      f.restock = false;
    });
    return h("div", { class: "overlay" },
      h("div", { class: "dialog", role: "dialog", "aria-label": "Confirm refund" },
        h("p", {}, `Refund ${money(s.dialog.amount)} to ${o.customer}?`),
        h("div", { class: "row" },
          button("Confirm refund", confirm, { class: "primary", "data-key": "confirm-refund" }),
          button("Cancel", () => kit.update(() => { s.dialog = null; }), { "data-key": "cancel-refund" }))));
  }

  function detail(s, id) {
    if (!s.signedIn) return kit.redirect("/login");
    const o = order(s, id);
    if (!o) return kit.redirect("/orders");
    if (!s.viewed.includes(id)) s.viewed.push(id);
    if (s.current !== id) {
      s.current = id;
      s.notice = null;
      s.dialog = null;
      for (const key of Object.keys(s.form)) if (key !== "order-search") delete s.form[key];
      s.form.status = o.status;
    }
    const f = s.form;
    const setStatus = () => kit.update(() => {
      if (!f.status || f.status === o.status) return;
      o.status = f.status;
      touch(s, o);
      s.notice = { kind: "info", text: `Status changed to ${o.status}.` };
    });
    const saveNote = () => kit.update(() => {
      const note = (f["internal-note"] || "").trim();
      if (!note) return;
      o.notes.push(note);
      touch(s, o);
      f["internal-note"] = "";
      s.notice = { kind: "info", text: "Internal note saved." };
    });
    const notify = () => kit.update(() => {
      if (!f.template) {
        s.notice = { kind: "error", text: "Choose a message template." };
        return;
      }
      o.notifications.push({ template: f.template, note: (f["customer-note"] || "").trim() });
      touch(s, o);
      s.notice = { kind: "info", text: `Notification sent to ${o.email}.` };
    });
    return page(s, `Order #${o.id}`,
      h("p", {}, `${o.customer} (${o.email}), ordered ${day(o.date)}, status ${o.status}`),
      h("table", {}, h("tbody", {}, o.lines.map((l, i) => h("tr", {},
        h("td", {}, `${l.qty} x ${l.name} at ${money(l.price)}`),
        h("td", {}, `${l.qty - remaining(o, i)} refunded`))))),
      s.notice ? message(s.notice.text, s.notice.kind) : null,
      refundForm(s, o),
      h("h2", {}, "Internal notes"),
      o.notes.map((n) => h("p", { class: "muted" }, n)),
      textField({ key: "internal-note", label: "Internal note", required: false }),
      button("Save note", saveNote, { "data-key": "save-note" }),
      h("h2", {}, "Status"),
      selectField({ key: "status", label: "Order status", placeholder: null, options: s.statuses.map((x) => [x, x]) }),
      button("Update status", setStatus, { "data-key": "update-status" }),
      h("h2", {}, "Notify the customer"),
      selectField({ key: "template", label: "Message template", options: s.templates.map((t) => [t, t]) }),
      textField({ key: "customer-note", label: "Personal note", required: false }),
      button("Send notification", notify, { class: "primary", "data-key": "send-notification" }),
      h("p", {}, link("/orders", "Back to orders", { "data-key": "back-to-orders" })),
      s.dialog && s.dialog.order === o.id ? confirmDialog(s, o) : null);
  }

  kit.mount({
    title: "Backoffice",
    startPath: "/login",
    init: (instance) => ({
      ...instance,
      orders: instance.orders.map((o) => ({ ...o, refunds: [], notes: [], notifications: [] })),
      signedIn: false, loginError: "", viewed: [], touched: [], current: null, notice: null, dialog: null,
    }),
    routes: [
      [/^\/login$/, login],
      [/^\/orders$/, orders],
      [/^\/orders\/(\d+)$/, detail],
    ],
    publicState: (s) => ({
      signedIn: s.signedIn,
      viewed: s.viewed,
      dialog: Boolean(s.dialog),
      orders: Object.fromEntries(s.touched.map((id) => {
        const o = order(s, id);
        return [id, { status: o.status, refunds: o.refunds, notes: o.notes, notifications: o.notifications }];
      })),
    }),
  });
})();
