// Reads a MiniWoB++ task's own state for feedbackgym: its instruction, whether the
// episode is done, the raw reward the task gave (without the time penalty) and, as
// "page", what the task's own DOM says about its progress (the values typed and
// chosen, the boxes ticked, the tab, email or results in view), which subgoals and
// the expert read. None of it reaches an agent's observation.
(() => {
  "use strict";
  const instruction = () => {
    if (typeof core === "undefined" || !document.getElementById("query")) return "";
    const said = core.getUtterance();
    return typeof said === "string" ? said : said.utterance;
  };
  const text = (el) => (el ? (el.textContent || "").replace(/\s+/g, " ").trim() : "");
  const value = (selector) => {
    const el = document.querySelector(selector);
    return el ? String(el.value) : "";
  };
  const shown = (el) => Boolean(el && el.getClientRects().length);

  // One reader per task page, keyed by the page's file name. Text boxes go by their id.
  const READERS = {
    "click-checkboxes": () => ({
      checked: Array.from(document.querySelectorAll("#boxes input[type=checkbox]"))
        .filter((box) => box.checked)
        .map((box) => text(box.parentElement)),
    }),
    "click-tab-2": () => {
      const panels = Array.from(document.querySelectorAll("#area > div[id^=tabs-]"));
      return {
        active: panels.findIndex(shown),
        links: panels.map((panel) => Array.from(panel.querySelectorAll(".alink"), text)),
      };
    },
    "choose-list": () => {
      const select = document.getElementById("options");
      const option = select && select.options[select.selectedIndex];
      return { selected: option ? text(option) : "" };
    },
    "email-inbox": () => {
      const email = document.getElementById("email");
      const reply = document.getElementById("reply");
      const forward = document.getElementById("forward");
      let compose = "", to = "", body = "";
      if (reply) {
        [compose, to, body] = ["reply", text(reply.querySelector(".reply-sender")), value("#reply-text")];
      } else if (forward) {
        [compose, to, body] = ["forward", value("#forward .forward-sender"), value("#forward-text")];
      }
      return { open: email ? text(email.querySelector(".email-sender")) : "", compose, to, body };
    },
    "enter-text": () => ({ tt: value("#tt") }),
    "login-user": () => ({ username: value("#username"), password: value("#password") }),
    "search-engine": () => {
      const links = Array.from(document.querySelectorAll("#page-content a.search-title"));
      return {
        query: value("#search-text"),
        results: links.map((link) => Number(link.getAttribute("data-result"))),
        titles: links.map(text),
      };
    },
  };
  const task = location.pathname.replace(/^.*\//, "").replace(/\.html$/, "");

  window.__fgAppState = () => ({
    utterance: instruction(),
    done: typeof WOB_DONE_GLOBAL !== "undefined" && WOB_DONE_GLOBAL === true,
    reward: typeof WOB_RAW_REWARD_GLOBAL === "number" ? WOB_RAW_REWARD_GLOBAL : 0,
    reason: typeof WOB_REWARD_REASON === "string" ? WOB_REWARD_REASON : "",
    page: task in READERS && document.getElementById("area") ? READERS[task]() : {},
  });
})();
