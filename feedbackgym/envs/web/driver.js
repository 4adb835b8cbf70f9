// feedbackgym's page driver: lists the interactive elements a user can see and act on,
// and carries out the typing, selecting, scrolling and going back that Python asks for.
// Clicks are real mouse clicks sent by Playwright at the points this script reports.
// Installed with addInitScript, so it exists in every document before the page's scripts.
(() => {
  "use strict";
  if (window.__fg) return;

  const ROLE_BY_ARIA = {
    button: "button", link: "link", checkbox: "checkbox", switch: "checkbox", radio: "radio",
    tab: "tab", menuitem: "button", option: "button", textbox: "textbox", searchbox: "textbox",
    combobox: "select", listbox: "select", treeitem: "link",
  };
  const INPUT_ROLES = {
    checkbox: "checkbox", radio: "radio", button: "button", submit: "button", reset: "button",
    image: "button", hidden: null, file: null, range: null, color: null,
  };
  const LEAF_TAGS = new Set(["A", "BUTTON", "INPUT", "SELECT", "TEXTAREA", "SUMMARY"]);
  const SKIP_TAGS = new Set(["SCRIPT", "STYLE", "TEMPLATE", "NOSCRIPT", "HEAD", "OPTION"]);

  let current = [];      // the elements of the last snapshot, indexed by id
  let scroller = null;   // the element that "scroll" moves

  const squash = (text) => (text || "").replace(/\s+/g, " ").trim();
  const clip = (text, n) => (text.length > n ? text.slice(0, n - 3) + "..." : text);

  function hasClickHandler(el) {
    if (typeof el.onclick === "function" || typeof el.__onclick === "function") return true;
    if (Array.isArray(el.__on) && el.__on.some((h) => h.type === "click")) return true;
    const jq = window.jQuery;
    if (jq && jq._data) {
      const events = jq._data(el, "events");
      if (events && (events.click || events.mousedown || events.mouseup)) return true;
    }
    return false;
  }

  function roleOf(el, style, parentPointer) {
    const aria = el.getAttribute("role");
    if (aria && aria in ROLE_BY_ARIA) return ROLE_BY_ARIA[aria];
    switch (el.tagName) {
      case "A":
        if (el.hasAttribute("href") || hasClickHandler(el) || style.cursor === "pointer") return "link";
        return null;
      case "BUTTON":
      case "SUMMARY":
        return "button";
      case "SELECT":
        return "select";
      case "TEXTAREA":
        return "textbox";
      case "INPUT": {
        const type = (el.getAttribute("type") || "text").toLowerCase();
        return type in INPUT_ROLES ? INPUT_ROLES[type] : "textbox";
      }
    }
    if (el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable)) {
      return "textbox";
    }
    if (hasClickHandler(el)) return "clickable";
    if (style.cursor === "pointer" && !parentPointer) return "clickable";
    return null;
  }

  function textOf(el) {
    return el ? squash(el.innerText !== undefined ? el.innerText : el.textContent) : "";
  }

  // The text of a <label>, leaving out the control it may wrap (a select's options).
  function labelText(label, control) {
    const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    const parts = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!control.contains(node)) parts.push(node.data);
    }
    return squash(parts.join(" "));
  }

  function labelOf(el, role) {
    const aria = el.getAttribute("aria-label");
    if (aria) return squash(aria);
    const by = el.getAttribute("aria-labelledby");
    if (by) return squash(by.split(/\s+/).map((id) => textOf(document.getElementById(id))).join(" "));
    if (el.labels && el.labels.length) return labelText(el.labels[0], el);
    if (el.tagName === "INPUT" && role === "button") return squash(el.value);
    if (role === "textbox" || role === "select") {
      return squash(el.getAttribute("placeholder") || el.getAttribute("title") || el.getAttribute("name") || "");
    }
    const text = textOf(el);
    if (text) return text;
    const img = el.querySelector && el.querySelector("img[alt]");
    // An icon without text: its title, alt text, name or, last, its CSS classes or id.
    return squash((el.getAttribute("title") || (img && img.getAttribute("alt")) ||
      el.getAttribute("name") || el.getAttribute("class") || el.id || "").replace(/[-_]/g, " "));
  }

  function valueOf(el, role) {
    if (role === "select") {
      const opt = el.selectedOptions && el.selectedOptions[0];
      return opt ? squash(opt.text) : "";
    }
    if (role === "textbox") return el.isContentEditable ? textOf(el) : String(el.value || "");
    return "";
  }

  function errorOf(el) {
    const ids = (el.getAttribute("aria-errormessage") || el.getAttribute("aria-describedby") || "").split(/\s+/);
    return squash(ids.filter(Boolean).map((id) => textOf(document.getElementById(id))).join(" "));
  }

  function intersect(a, b) {
    const r = { left: Math.max(a.left, b.left), top: Math.max(a.top, b.top),
      right: Math.min(a.right, b.right), bottom: Math.min(a.bottom, b.bottom) };
    return r.right - r.left >= 1 && r.bottom - r.top >= 1 ? r : null;
  }

  function reaches(el, x, y) {
    const hit = document.elementFromPoint(x, y);
    if (!hit) return false;
    if (hit === el || el.contains(hit)) return true;
    return hit.tagName === "LABEL" && hit.control === el;
  }

  // Walks the visible DOM in document order, collecting interactive elements in view.
  function collect(root, cfg) {
    const view = { left: 0, top: 0, right: window.innerWidth, bottom: window.innerHeight };
    const found = [];
    const seen = { above: false, below: false, hidden: {} };
    scroller = null;
    const skip = new Set(cfg.exclude || []);
    const walk = (el, box, parentPointer) => {
      if (SKIP_TAGS.has(el.tagName) || (el.id && skip.has(el.id))) return;
      const style = window.getComputedStyle(el);
      if (style.display === "none" || style.visibility === "hidden") return;
      const rect = el.getBoundingClientRect();
      const role = roleOf(el, style, parentPointer);
      if (role) {
        const inBox = intersect(rect, box);
        const shown = inBox && intersect(inBox, view);
        if (shown) {
          const x = (shown.left + shown.right) / 2;
          const y = (shown.top + shown.bottom) / 2;
          if (reaches(el, x, y)) found.push({ el, role, x, y, rect });
        } else if (inBox) {
          const where = inBox.bottom > view.bottom ? "below" : "above";
          seen[where] = true;
          const key = keyOf(el);
          if (key && !(key in seen.hidden)) seen.hidden[key] = where;
        }
      }
      if (role && LEAF_TAGS.has(el.tagName)) return;
      let inner = box;
      if (style.overflowY !== "visible" || style.overflowX !== "visible") {
        inner = intersect(rect, box) || { left: 0, top: 0, right: 0, bottom: 0 };
        if (!scroller && (style.overflowY === "auto" || style.overflowY === "scroll") &&
            el.scrollHeight > el.clientHeight + 1) {
          scroller = el;
        }
      }
      const pointer = style.cursor === "pointer";
      for (const child of el.children) walk(child, inner, pointer);
    };
    const everywhere = { left: -1e9, top: -1e9, right: 1e9, bottom: 1e9 };
    walk(root, everywhere, false);
    const page = document.scrollingElement;
    if (page && page.scrollHeight > page.clientHeight + 1) scroller = page;
    return { found: found.filter((item) => !redundant(item, found)), seen };
  }

  // A generic clickable or a tab that only wraps other listed elements (a tab strip, a
  // tab around its link) adds nothing: its label is theirs.
  function redundant(item, found) {
    if (item.role !== "clickable" && item.role !== "tab") return false;
    const inner = found.filter((other) => other !== item && item.el.contains(other.el));
    if (!inner.length) return false;
    const outer = inner.filter((o) => !inner.some((p) => p !== o && p.el.contains(o.el)));
    const labels = outer.map((other) => labelOf(other.el, other.role));
    const own = labelOf(item.el, item.role);
    return labels.includes(own) || labels.join(" ") === own;
  }

  function keyOf(el) {
    return el.getAttribute("data-key") || el.id || el.getAttribute("name") || "";
  }

  function describe(item, id) {
    const { el, role } = item;
    const d = {
      id,
      role,
      label: clip(labelOf(el, role), 80),
      value: clip(valueOf(el, role), 80),
      key: keyOf(el),
      x: Math.round(item.x * 10) / 10,
      y: Math.round(item.y * 10) / 10,
      width: Math.round(item.rect.width),
      height: Math.round(item.rect.height),
      checked: role === "checkbox" || role === "radio"
        ? Boolean(el.checked || el.getAttribute("aria-checked") === "true") : false,
      disabled: Boolean(el.disabled || el.getAttribute("aria-disabled") === "true"),
      focused: document.activeElement === el,
      invalid: el.getAttribute("aria-invalid") === "true",
      required: Boolean(el.required || el.getAttribute("aria-required") === "true"),
      selected: el.getAttribute("aria-selected") === "true" || el.getAttribute("aria-current") === "page",
      expanded: el.getAttribute("aria-expanded") === "true",
      error: "",
      options: [],
    };
    if (d.invalid) d.error = clip(errorOf(el), 120);
    if (role === "select" && el.options) d.options = Array.from(el.options, (o) => squash(o.text));
    return d;
  }

  function messagesIn(root) {
    const nodes = root.querySelectorAll("[role=alert], [role=status], [aria-live]");
    const out = [];
    for (const node of nodes) {
      const text = textOf(node);
      if (text && node.getClientRects().length) out.push(clip(text, 160));
    }
    return out.slice(0, 6);
  }

  function scrollState() {
    if (!scroller) return { up: false, down: false };
    const top = scroller === document.scrollingElement ? window.scrollY : scroller.scrollTop;
    return { up: top > 0, down: top + scroller.clientHeight < scroller.scrollHeight - 1 };
  }

  function settle() {
    return new Promise((resolve) => setTimeout(resolve, 0));
  }

  // Answers a JSON string (see driver.py), "null" when there is no document yet.
  async function snapshot(cfg) {
    await settle();
    const root = (cfg.root && document.querySelector(cfg.root)) || document.body;
    if (!root) return "null";
    const { found, seen } = collect(root, cfg);
    const shown = found.slice(0, cfg.max);
    for (const item of found.slice(cfg.max)) {
      const key = keyOf(item.el);
      if (key && !(key in seen.hidden)) seen.hidden[key] = "below";
    }
    current = shown.map((item) => item.el);
    const heading = document.querySelector("h1");
    const history = window.history.state;
    return JSON.stringify({
      title: squash(document.title),
      path: location.pathname + location.search + location.hash,
      heading: heading ? clip(textOf(heading), 120) : "",
      messages: messagesIn(root),
      elements: shown.map(describe),
      more_above: seen.above,
      more_below: seen.below || found.length > shown.length,
      scroll: scrollState(),
      can_go_back: Boolean(history && history.fgIndex > 0),
      hidden: seen.hidden,
      app: typeof window.__fgAppState === "function" ? window.__fgAppState() : null,
    });
  }

  function setValue(el, value) {
    el.focus();
    if (el.isContentEditable) {
      el.textContent = value;
    } else {
      const proto = el instanceof HTMLTextAreaElement ? HTMLTextAreaElement : HTMLInputElement;
      Object.getOwnPropertyDescriptor(proto.prototype, "value").set.call(el, value);
    }
  }

  function chooseOption(el, value) {
    const want = squash(value).toLowerCase();
    const option = Array.from(el.options).find(
      (o) => squash(o.text).toLowerCase() === want || String(o.value).toLowerCase() === want);
    if (!option) throw new Error(`no option ${JSON.stringify(value)}`);
    el.focus();
    el.value = option.value;
  }

  function goBack() {
    return new Promise((resolve) => {
      const done = () => { window.removeEventListener("popstate", done); resolve(); };
      window.addEventListener("popstate", done);
      window.history.back();
      setTimeout(done, 1000);
    });
  }

  async function act(action, cfg) {
    if (action.verb === "scroll") {
      if (scroller) {
        const step = Math.round(scroller.clientHeight * 0.8) * (action.dir === "up" ? -1 : 1);
        if (scroller === document.scrollingElement) window.scrollBy(0, step);
        else scroller.scrollTop += step;
      }
    } else if (action.verb === "back") {
      await goBack();
    } else {
      const el = current[action.id];
      if (!el || !el.isConnected) throw new Error(`element ${action.id} is gone`);
      if (action.verb === "type") setValue(el, action.value);
      else if (action.verb === "select") chooseOption(el, action.value);
      else throw new Error(`unknown verb ${action.verb}`);
      el.dispatchEvent(new Event("input", { bubbles: true }));
      el.dispatchEvent(new Event("change", { bubbles: true }));
    }
    return snapshot(cfg);
  }

  window.__fg = { snapshot, act };
})();
