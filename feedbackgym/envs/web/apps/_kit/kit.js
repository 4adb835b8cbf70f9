// The small framework shared by feedbackgym's packaged web apps: a store kept in
// sessionStorage (so a reload keeps the state), client-side routes with history
// entries, a DOM builder, accessible form controls and shared validators.
//
// An app calls kit.mount({title, startPath, init, routes, publicState}); feedbackgym
// starts an episode with window.__fgStart(instance) and reads window.__fgAppState().
// Everything renders synchronously: after an event handler returns, the page is done.
(function () {
  "use strict";
  const STORE = "feedbackgym-app";
  const kit = (window.kit = {});
  let app = null;
  let state = null;

  // --- DOM ---------------------------------------------------------------------------------

  kit.h = function (tag, attrs, ...children) {
    const el = document.createElement(tag);
    let value;
    for (const [name, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (name.startsWith("on")) el.addEventListener(name.slice(2), v);
      else if (name === "value") value = v;
      else if (name === "checked") el.checked = true;
      else el.setAttribute(name, v === true ? "" : String(v));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    if (value !== undefined) el.value = value;
    return el;
  };
  const h = kit.h;

  kit.link = (path, text, attrs) =>
    h("a", { href: path, onclick: (e) => { e.preventDefault(); kit.go(path); }, ...attrs }, text);

  kit.button = (text, onclick, attrs) => h("button", { type: "button", onclick, ...attrs }, text);

  // "Previous page" and "Next page" buttons for page pageNo of pages; pageUrl(page) is the
  // path of a page (its number as a string).
  kit.pager = (pageNo, pages, pageUrl) =>
    h("div", { class: "row" },
      pageNo > 1 ? kit.button("Previous page", () => kit.go(pageUrl(String(pageNo - 1))),
        { "data-key": "prev-page" }) : null,
      pageNo < pages ? kit.button("Next page", () => kit.go(pageUrl(String(pageNo + 1))),
        { "data-key": "next-page" }) : null);

  kit.message = (text, kind) =>
    text ? h("div", { class: `message ${kind || "info"}`, role: kind === "error" ? "alert" : "status" }, text) : null;

  function described(key, error) {
    return { "aria-invalid": error ? "true" : null, "aria-describedby": error ? `${key}-error` : null };
  }

  function errorLine(key, error) {
    return error ? h("div", { class: "field-error", id: `${key}-error` }, error) : null;
  }

  // A labelled text box whose typing is stored in state.form[key] without re-rendering.
  kit.textField = ({ key, label, type, errors, required = true }) =>
    h("div", { class: "field" },
      h("label", { for: key }, label),
      h("input", {
        id: key, name: key, type: type || "text", value: state.form[key] || "", required,
        ...described(key, errors && errors[key]),
        oninput: (e) => { state.form[key] = e.target.value; save(); },
      }),
      errorLine(key, errors && errors[key]));

  // A labelled select over [value, text] pairs, stored in state.form[key] (re-renders),
  // or handed to onchange(value) with its current value given as `value`.
  kit.selectField = ({ key, label, options, errors, placeholder, onchange, value }) =>
    h("div", { class: "field" },
      h("label", { for: key }, label),
      h("select", {
        id: key, name: key, value: onchange ? value : state.form[key] || "",
        ...described(key, errors && errors[key]),
        onchange: (e) => (onchange
          ? onchange(e.target.value)
          : kit.update(() => { state.form[key] = e.target.value; })),
      },
        placeholder === null ? null : h("option", { value: "" }, placeholder || "Choose..."),
        options.map(([v, text]) => h("option", { value: v }, text))),
      errorLine(key, errors && errors[key]));

  kit.radioField = ({ key, legend, options, errors }) =>
    h("fieldset", { class: "field", ...described(key, errors && errors[key]) },
      h("legend", {}, legend),
      options.map(([value, text]) => h("label", { class: "choice" },
        h("input", {
          type: "radio", name: key, value, "data-key": `${key}-${value}`,
          checked: state.form[key] === value,
          onchange: () => kit.update(() => { state.form[key] = value; }),
        }), ` ${text}`)),
      errorLine(key, errors && errors[key]));

  kit.checkboxField = ({ key, label, errors }) =>
    h("div", { class: "field" },
      h("label", { class: "choice" },
        h("input", {
          type: "checkbox", id: key, name: key, checked: Boolean(state.form[key]),
          ...described(key, errors && errors[key]),
          onchange: (e) => kit.update(() => { state.form[key] = e.target.checked; }),
        }), ` ${label}`),
      errorLine(key, errors && errors[key]));

  kit.money = (cents) => `$${(cents / 100).toFixed(2)}`;

  // --- validators --------------------------------------------------------------------------

  const POSTCODES = {
    Germany: [/^\d{5}$/, "5 digits"],
    France: [/^\d{5}$/, "5 digits"],
    Austria: [/^\d{4}$/, "4 digits"],
    Netherlands: [/^\d{4} ?[A-Z]{2}$/, "4 digits and 2 letters"],
    "United Kingdom": [/^[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}$/, "a UK postcode such as SW1A 1AA"],
  };
  kit.postcodeError = (postcode, country) => {
    const rule = POSTCODES[country];
    if (!postcode) return "Enter a postcode";
    if (rule && !rule[0].test(postcode)) return `A postcode in ${country} has ${rule[1]}`;
    return "";
  };
  kit.required = (value, what) => (value ? "" : `Enter ${what}`);

  // --- store and routes --------------------------------------------------------------------

  function save() {
    sessionStorage.setItem(STORE, JSON.stringify(state));
  }

  kit.state = () => state;

  kit.update = (change) => {
    change(state);
    save();
    render();
  };

  kit.go = (path) => {
    const index = ((window.history.state && window.history.state.fgIndex) || 0) + 1;
    window.history.pushState({ fgIndex: index }, "", path);
    kit.update(() => {});
  };

  kit.redirect = (path) => {
    window.history.replaceState(window.history.state, "", path);
    render();
  };

  kit.query = (name) => new URLSearchParams(window.location.search).get(name);

  function render() {
    const root = document.getElementById("app");
    if (!state) return;
    const path = window.location.pathname;
    for (const [pattern, view] of app.routes) {
      const match = path.match(pattern);
      if (match) {
        const page = view(state, ...match.slice(1));
        if (!page) return;  // the view redirected
        document.title = `${page.title} - ${app.title}`;
        root.replaceChildren(page.body);
        return;
      }
    }
    kit.redirect(app.startPath);
  }

  kit.mount = (definition) => {
    app = definition;
    window.__fgStart = (instance) => {
      state = app.init(instance);
      state.form = state.form || {};
      window.history.replaceState({ fgIndex: 0 }, "", app.startPath);
      save();
      render();
    };
    window.__fgAppState = () => (state ? JSON.parse(JSON.stringify(app.publicState(state))) : null);
    window.addEventListener("popstate", render);
    const saved = sessionStorage.getItem(STORE);
    if (saved) {
      state = JSON.parse(saved);
      render();
    }
  };
})();
