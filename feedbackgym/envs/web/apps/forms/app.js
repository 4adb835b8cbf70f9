// Riverside Sports Club: a four-page membership application with validation on every
// page, pre-filled from a stale profile, then a review page and submission. The
// profile, the taken usernames and "today" come from the episode's instance.
(function () {
  "use strict";
  const { h, link, button, message, textField, selectField, radioField, checkboxField } = kit;
  const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December"];
  const PAGES = ["personal", "address", "account", "plan"];
  const TITLES = { personal: "Personal details", address: "Address", account: "Account", plan: "Membership plan" };

  const days = () => Array.from({ length: 28 }, (_, i) => String(i + 1));
  const trim = (s, key) => (s.form[key] || "").trim();

  function age(s) {
    const [year, month, day] = s.today.split("-").map(Number);
    const born = [Number(s.form["dob-year"]), MONTHS.indexOf(s.form["dob-month"]) + 1, Number(s.form["dob-day"])];
    let years = year - born[0];
    if (month < born[1] || (month === born[1] && day < born[2])) years -= 1;
    return years;
  }

  // Each page: its fields, a validator returning {key: error}, and the values it commits.
  const CHECKS = {
    personal(s) {
      const e = {};
      for (const [key, what] of [["first-name", "your first name"], ["last-name", "your last name"]]) {
        const problem = kit.required(trim(s, key), what);
        if (problem) e[key] = problem;
      }
      if (!/^[^@\s]+@[^@\s]+\.[a-z]{2,}$/i.test(trim(s, "email"))) e.email = "Enter a valid email address";
      if (trim(s, "email-confirm") !== trim(s, "email")) e["email-confirm"] = "The email addresses do not match";
      if (!/^\+\d{1,3}( \d{1,8}){2,3}$/.test(trim(s, "phone"))) {
        e.phone = "Enter the phone number in international format, e.g. +49 30 5550123";
      }
      if (!s.form["dob-day"] || !s.form["dob-month"] || !s.form["dob-year"]) e["dob-day"] = "Enter your date of birth";
      else if (age(s) < 18) e["dob-day"] = "Members must be 18 or older";
      return e;
    },
    address(s) {
      const e = {};
      const country = s.form.country;
      for (const [key, what] of [["street", "a street"], ["city", "a city"], ["country", "a country"]]) {
        const problem = kit.required(trim(s, key), what);
        if (problem) e[key] = problem;
      }
      const postcode = kit.postcodeError(trim(s, "postcode"), country);
      if (postcode) e.postcode = postcode;
      if (s.form["mailing-differs"]) {
        for (const [key, what] of [["mailing-street", "a street"], ["mailing-city", "a city"]]) {
          const problem = kit.required(trim(s, key), what);
          if (problem) e[key] = problem;
        }
        const mailing = kit.postcodeError(trim(s, "mailing-postcode"), country);
        if (mailing) e["mailing-postcode"] = mailing;
      }
      return e;
    },
    account(s) {
      const e = {};
      const username = trim(s, "username");
      if (!/^[a-z0-9._]{3,16}$/.test(username)) {
        e.username = "Use 3-16 lower-case letters, digits, dots or underscores";
      } else if (s.taken.includes(username)) {
        e.username = `The username ${username} is already taken`;
        if (!s.rejected.includes(username)) s.rejected.push(username);
      }
      const password = s.form.password || "";
      if (password.length < 8 || !/\d/.test(password) || !/[A-Z]/.test(password)) {
        e.password = "Use at least 8 characters with a digit and a capital letter";
      }
      if ((s.form["password-confirm"] || "") !== password) e["password-confirm"] = "The passwords do not match";
      if (!s.form.question) e.question = "Choose a security question";
      const answer = kit.required(trim(s, "answer"), "an answer");
      if (answer) e.answer = answer;
      return e;
    },
    plan(s) {
      const e = {};
      if (!s.form.plan) e.plan = "Choose a plan";
      if (!s.form.billing) e.billing = "Choose how to pay";
      if (!s.form["start-month"]) e["start-month"] = "Choose a start month";
      if (!s.form.terms) e.terms = "Accept the club rules to continue";
      return e;
    },
  };

  const VALUES = {
    personal: (s) => ({
      first: trim(s, "first-name"), last: trim(s, "last-name"), email: trim(s, "email"),
      phone: trim(s, "phone"),
      dob: { day: s.form["dob-day"], month: s.form["dob-month"], year: s.form["dob-year"] },
    }),
    address: (s) => ({
      street: trim(s, "street"), city: trim(s, "city"), postcode: trim(s, "postcode"), country: s.form.country,
      mailing: s.form["mailing-differs"]
        ? { street: trim(s, "mailing-street"), city: trim(s, "mailing-city"), postcode: trim(s, "mailing-postcode") }
        : null,
    }),
    account: (s) => ({
      username: trim(s, "username"), password: s.form.password, question: s.form.question, answer: trim(s, "answer"),
    }),
    plan: (s) => ({
      plan: s.form.plan, billing: s.form.billing, start: s.form["start-month"], newsletter: Boolean(s.form.newsletter),
    }),
  };

  const FIELDS = {
    personal: (s, errors) => [
      textField({ key: "first-name", label: "First name", errors }),
      textField({ key: "last-name", label: "Last name", errors }),
      textField({ key: "email", label: "Email", type: "email", errors }),
      textField({ key: "email-confirm", label: "Confirm email", type: "email", errors }),
      textField({ key: "phone", label: "Phone", type: "tel", errors }),
      h("div", { class: "row" },
        selectField({ key: "dob-day", label: "Day of birth", errors, options: days().map((d) => [d, d]) }),
        selectField({ key: "dob-month", label: "Month of birth", options: MONTHS.map((m) => [m, m]) }),
        selectField({ key: "dob-year", label: "Year of birth", options: s.years.map((y) => [y, y]) })),
    ],
    address: (s, errors) => [
      textField({ key: "street", label: "Street and number", errors }),
      textField({ key: "city", label: "City", errors }),
      textField({ key: "postcode", label: "Postcode", errors }),
      selectField({ key: "country", label: "Country", errors, options: s.countries.map((c) => [c, c]) }),
      checkboxField({ key: "mailing-differs", label: "My mailing address is different", errors }),
      s.form["mailing-differs"] ? [
        textField({ key: "mailing-street", label: "Mailing street and number", errors }),
        textField({ key: "mailing-city", label: "Mailing city", errors }),
        textField({ key: "mailing-postcode", label: "Mailing postcode", errors }),
      ] : null,
    ],
    account: (s, errors) => [
      textField({ key: "username", label: "Username", errors }),
      textField({ key: "password", label: "Password", type: "password", errors }),
      textField({ key: "password-confirm", label: "Confirm password", type: "password", errors }),
      selectField({ key: "question", label: "Security question", errors, options: s.questions.map((q) => [q, q]) }),
      textField({ key: "answer", label: "Answer", errors }),
    ],
    plan: (s, errors) => [
      radioField({ key: "plan", legend: "Plan", errors,
        options: [["basic", "Basic"], ["plus", "Plus"], ["premium", "Premium"]] }),
      radioField({ key: "billing", legend: "Billing", errors, options: [["monthly", "Monthly"], ["yearly", "Yearly"]] }),
      selectField({ key: "start-month", label: "Start month", errors, options: MONTHS.map((m) => [m, m]) }),
      checkboxField({ key: "newsletter", label: "Send me the club newsletter", errors }),
      checkboxField({ key: "terms", label: "I accept the club rules", errors }),
    ],
  };

  function page(s, title, ...content) {
    return {
      title,
      body: h("div", {},
        h("header", {}, h("span", { class: "brand" }, "Riverside Sports Club")),
        h("main", {}, h("h1", {}, title), ...content)),
    };
  }

  // The first page not committed yet ("review" when all are).
  const nextPage = (s) => PAGES.find((p) => !s.pages[p]) || "review";

  function formPage(s, name) {
    const index = PAGES.indexOf(name);
    if (index > PAGES.indexOf(nextPage(s)) && nextPage(s) !== "review") {
      return kit.redirect(`/apply/${nextPage(s)}`);
    }
    const errors = s.errors[name] || {};
    const submit = () => kit.update(() => {
      const e = CHECKS[name](s);
      s.errors[name] = e;
      if (Object.keys(e).length) return;
      s.pages[name] = VALUES[name](s);
      kit.go(index + 1 < PAGES.length ? `/apply/${PAGES[index + 1]}` : "/apply/review");
    });
    const count = Object.keys(errors).length;
    return page(s, `${TITLES[name]} (step ${index + 1} of ${PAGES.length})`,
      count ? message(`Please correct ${count} error${count > 1 ? "s" : ""} below.`, "error") : null,
      FIELDS[name](s, errors),
      h("div", { class: "row" },
        index > 0 ? link(`/apply/${PAGES[index - 1]}`, "Previous step", { "data-key": "prev" }) : null,
        button(index + 1 < PAGES.length ? "Next" : "Review application", submit,
          { class: "primary", "data-key": "next" })));
  }

  function review(s) {
    if (nextPage(s) !== "review") return kit.redirect(`/apply/${nextPage(s)}`);
    const p = s.pages;
    const submit = () => kit.update(() => {
      s.submitted = JSON.parse(JSON.stringify(p));
      kit.go("/apply/done");
    });
    const summary = (name, text) => h("div", { class: "card" }, h("p", {}, text),
      link(`/apply/${name}`, `Edit ${TITLES[name].toLowerCase()}`, { "data-key": `edit-${name}` }));
    return page(s, "Review your application",
      summary("personal", `${p.personal.first} ${p.personal.last}, ${p.personal.email}, ${p.personal.phone}, ` +
        `born ${p.personal.dob.day} ${p.personal.dob.month} ${p.personal.dob.year}`),
      summary("address", `${p.address.street}, ${p.address.postcode} ${p.address.city}, ${p.address.country}` +
        (p.address.mailing ? `; mail to ${p.address.mailing.street}, ${p.address.mailing.postcode} ${p.address.mailing.city}` : "")),
      summary("account", `Username ${p.account.username}, security question: ${p.account.question}`),
      summary("plan", `${p.plan.plan} plan, billed ${p.plan.billing}, from ${p.plan.start}` +
        (p.plan.newsletter ? ", with newsletter" : "")),
      button("Submit application", submit, { class: "primary", "data-key": "submit" }));
  }

  function done(s) {
    if (!s.submitted) return kit.redirect("/apply/review");
    return page(s, "Application received",
      message(`Thank you, ${s.submitted.personal.first}. Your reference is ${s.reference}.`, "info"));
  }

  kit.mount({
    title: "Riverside Sports Club",
    startPath: "/apply/personal",
    init: (instance) => ({
      ...instance, form: { ...instance.prefill }, pages: {}, errors: {}, rejected: [], submitted: null,
    }),
    routes: [
      [/^\/apply\/(personal|address|account|plan)$/, formPage],
      [/^\/apply\/review$/, review],
      [/^\/apply\/done$/, done],
    ],
    publicState: (s) => ({ pages: s.pages, rejected: s.rejected, submitted: s.submitted }),
  });
})();
