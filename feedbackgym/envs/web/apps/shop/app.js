// Nordshop: search and filter a catalogue, choose a variant and quantity, apply a
// coupon, give shipping details, choose delivery, pay and place the order.
// The catalogue, coupons and delivery options come from the episode's instance.
(function () {
  "use strict";
  const { h, link, button, message, textField, selectField, radioField, money } = kit;
  const QUANTITIES = ["1", "2", "3", "4", "5"];

  const product = (s, id) => s.products.find((p) => p.id === id);
  const lineName = (s, line) => `${product(s, line.product).name} (${line.colour}, ${line.size})`;
  const subtotal = (s, lines) =>
    lines.reduce((sum, l) => sum + product(s, l.product).price * l.qty, 0);
  const discount = (s, lines) =>
    s.coupon ? Math.round((subtotal(s, lines) * s.coupons[s.coupon].percent) / 100) : 0;
  const deliveryPrice = (s) => (s.delivery ? s.deliveries.find((d) => d.id === s.delivery).price : 0);

  function page(s, title, ...content) {
    const count = s.cart.reduce((n, l) => n + l.qty, 0);
    return {
      title,
      body: h("div", {},
        h("header", {},
          link("/", s.store, { class: "brand", "data-key": "home" }),
          h("input", {
            type: "search", id: "search", "aria-label": "Search products",
            value: s.form.search || "",
            oninput: (e) => { s.form.search = e.target.value; },
          }),
          button("Search", () => kit.go(`/search?q=${encodeURIComponent((s.form.search || "").trim())}`),
            { "data-key": "search-go" }),
          link("/cart", `Cart (${count})`, { "data-key": "cart-link" })),
        h("main", {}, h("h1", {}, title), ...content)),
    };
  }

  function home(s) {
    const categories = [...new Set(s.products.map((p) => p.category))].sort();
    return page(s, `Welcome to ${s.store}`,
      h("p", {}, "Search the catalogue above, or browse a category:"),
      h("ul", {}, categories.map((c) =>
        h("li", {}, link(`/search?category=${encodeURIComponent(c)}`, c, { "data-key": `category-${c}` })))));
  }

  function matches(p, q, category, brand) {
    const text = `${p.name} ${p.brand} ${p.category}`.toLowerCase();
    const words = q.toLowerCase().split(/\s+/).filter(Boolean);
    return words.every((w) => text.includes(w)) && (!category || p.category === category) &&
      (!brand || p.brand === brand);
  }

  function searchUrl(changes) {
    const params = new URLSearchParams(window.location.search);
    for (const [k, v] of Object.entries(changes)) {
      if (v) params.set(k, v);
      else params.delete(k);
    }
    return `/search?${params.toString()}`;
  }

  function viewProduct(s, p) {
    kit.update(() => {
      s.form.colour = "";
      s.form.size = "";
      s.form.qty = "1";
      s.productMessage = "";
    });
    kit.go(`/product/${p.id}`);
  }

  function search(s) {
    const q = kit.query("q") || "";
    const category = kit.query("category") || "";
    const brand = kit.query("brand") || "";
    const sort = kit.query("sort") || "relevance";
    const pageNo = Number(kit.query("page") || "1");
    const found = s.products.filter((p) => matches(p, q, category, ""));
    const brands = [...new Set(found.map((p) => p.brand))].sort();
    let shown = found.filter((p) => !brand || p.brand === brand);
    if (sort === "price-asc") shown = [...shown].sort((a, b) => a.price - b.price);
    if (sort === "price-desc") shown = [...shown].sort((a, b) => b.price - a.price);
    const pages = Math.max(1, Math.ceil(shown.length / s.pageSize));
    const slice = shown.slice((pageNo - 1) * s.pageSize, pageNo * s.pageSize);
    const title = q ? `Results for "${q}"` : category || "All products";
    return page(s, title,
      h("div", { class: "row" },
        selectField({
          key: "brand-filter", label: "Brand", placeholder: "All brands", value: brand,
          options: brands.map((b) => [b, b]),
          onchange: (v) => kit.go(searchUrl({ brand: v, page: "" })),
        }),
        selectField({
          key: "sort", label: "Sort by", placeholder: null, value: sort,
          options: [["relevance", "Relevance"], ["price-asc", "Price: low to high"],
            ["price-desc", "Price: high to low"]],
          onchange: (v) => kit.go(searchUrl({ sort: v, page: "" })),
        })),
      h("p", { class: "muted", role: "status" },
        `${shown.length} products, page ${pageNo} of ${pages}`),
      slice.map((p) => h("div", { class: "card" },
        h("div", { class: "thumb" }),
        h("a", {
          href: `/product/${p.id}`, "data-key": `product-${p.id}`,
          onclick: (e) => { e.preventDefault(); viewProduct(s, p); },
        }, `${p.name} by ${p.brand}`),
        h("div", { class: "muted" }, `${money(p.price)} - ${p.colours.join(", ")}`))),
      kit.pager(pageNo, pages, (page) => searchUrl({ page })));
  }

  function productPage(s, id) {
    const p = product(s, id);
    if (!p) return kit.redirect("/");
    if (!s.viewed.includes(id)) {
      s.viewed.push(id);
    }
    const add = () => kit.update(() => {
      const { colour, size } = s.form;
      if (!colour || !size) {
        s.productMessage = "Choose a colour and a size first.";
        return;
      }
      const qty = Number(s.form.qty || "1");
      const line = s.cart.find((l) => l.product === id && l.colour === colour && l.size === size);
      if (line) line.qty = Math.min(5, line.qty + qty);
      else s.cart.push({ product: id, colour, size, qty });
      s.productMessage = `Added ${qty} x ${p.name} (${colour}, ${size}) to the cart.`;
    });
    return page(s, p.name,
      h("p", {}, `${p.brand} - ${p.category} - ${money(p.price)}`),
      selectField({ key: "colour", label: "Colour", options: p.colours.map((c) => [c, c]) }),
      selectField({ key: "size", label: "Size", options: p.sizes.map((z) => [z, z]) }),
      selectField({ key: "qty", label: "Quantity", placeholder: null, options: QUANTITIES.map((q) => [q, q]) }),
      message(s.productMessage, s.productMessage.startsWith("Added") ? "info" : "error"),
      button("Add to cart", add, { class: "primary", "data-key": "add-to-cart" }));
  }

  function cart(s) {
    const applyCoupon = () => kit.update(() => {
      const code = (s.form.coupon || "").trim().toUpperCase();
      if (!code) return;
      s.tried.push(code);
      const coupon = s.coupons[code];
      if (!coupon) s.couponMessage = `Coupon ${code} does not exist.`;
      else if (coupon.expired) s.couponMessage = `Coupon ${code} has expired.`;
      else {
        s.coupon = code;
        s.couponMessage = `Coupon ${code} applied: ${coupon.percent}% off.`;
      }
    });
    const lines = s.cart.map((line, i) => h("div", { class: "card" },
      h("div", {}, `${lineName(s, line)} - ${money(product(s, line.product).price)} each`),
      h("div", { class: "row" },
        h("label", { for: `qty-${i}` }, `Quantity of ${lineName(s, line)}`),
        h("select", {
          id: `qty-${i}`, value: String(line.qty),
          onchange: (e) => kit.update(() => { line.qty = Number(e.target.value); }),
        }, QUANTITIES.map((q) => h("option", { value: q }, q))),
        button(`Remove ${lineName(s, line)}`, () => kit.update(() => { s.cart.splice(i, 1); }),
          { "data-key": `remove-${i}` }))));
    return page(s, "Your cart",
      s.cart.length ? lines : h("p", {}, "Your cart is empty."),
      h("h2", {}, "Coupon"),
      s.coupon
        ? h("div", { class: "row" }, `Coupon ${s.coupon} (-${s.coupons[s.coupon].percent}%)`,
          button("Remove coupon", () => kit.update(() => { s.coupon = null; s.couponMessage = ""; }),
            { "data-key": "remove-coupon" }))
        : h("div", {}, textField({ key: "coupon", label: "Coupon code", required: false }),
          button("Apply coupon", applyCoupon, { "data-key": "apply-coupon" })),
      message(s.couponMessage, s.coupon ? "info" : "error"),
      h("p", {}, `Subtotal ${money(subtotal(s, s.cart))}, discount ${money(discount(s, s.cart))}`),
      button("Proceed to checkout", () => s.cart.length && kit.go("/checkout/shipping"),
        { class: "primary", "data-key": "checkout" }));
  }

  // The first checkout page that is not done yet.
  function checkoutStep(s) {
    if (!s.cart.length) return "/cart";
    if (!s.shipping) return "/checkout/shipping";
    if (!s.delivery) return "/checkout/delivery";
    if (!s.payment) return "/checkout/payment";
    return "/checkout/review";
  }
  const ORDER = ["/cart", "/checkout/shipping", "/checkout/delivery", "/checkout/payment", "/checkout/review"];

  function guard(s, path) {
    const allowed = checkoutStep(s);
    if (ORDER.indexOf(path) > ORDER.indexOf(allowed)) {
      kit.redirect(allowed);
      return false;
    }
    return true;
  }

  function shipping(s) {
    if (!guard(s, "/checkout/shipping")) return null;
    const errors = s.errors.shipping || {};
    const submit = () => kit.update(() => {
      const f = s.form;
      const e = {};
      for (const [key, what] of [["ship-name", "your full name"], ["ship-street", "a street"],
        ["ship-city", "a city"], ["ship-country", "a country"]]) {
        const problem = kit.required((f[key] || "").trim(), what);
        if (problem) e[key] = problem;
      }
      const postcode = kit.postcodeError((f["ship-postcode"] || "").trim(), f["ship-country"]);
      if (postcode) e["ship-postcode"] = postcode;
      s.errors.shipping = e;
      if (Object.keys(e).length) return;
      s.shipping = {
        name: f["ship-name"].trim(), street: f["ship-street"].trim(), city: f["ship-city"].trim(),
        postcode: f["ship-postcode"].trim(), country: f["ship-country"],
      };
      kit.go("/checkout/delivery");
    });
    return page(s, "Shipping address",
      Object.keys(errors).length ? message("Please correct the errors below.", "error") : null,
      textField({ key: "ship-name", label: "Full name", errors }),
      textField({ key: "ship-street", label: "Street and number", errors }),
      textField({ key: "ship-city", label: "City", errors }),
      textField({ key: "ship-postcode", label: "Postcode", errors }),
      selectField({ key: "ship-country", label: "Country", errors, options: s.countries.map((c) => [c, c]) }),
      button("Continue to delivery", submit, { class: "primary", "data-key": "to-delivery" }));
  }

  function delivery(s) {
    if (!guard(s, "/checkout/delivery")) return null;
    const errors = s.errors.delivery || {};
    const submit = () => kit.update(() => {
      s.errors.delivery = s.form.delivery ? {} : { delivery: "Choose a delivery option" };
      if (!s.form.delivery) return;
      s.delivery = s.form.delivery;
      kit.go("/checkout/payment");
    });
    return page(s, "Delivery",
      radioField({
        key: "delivery", legend: "Delivery option", errors,
        options: s.deliveries.map((d) => [d.id, `${d.label} (${money(d.price)})`]),
      }),
      button("Continue to payment", submit, { class: "primary", "data-key": "to-payment" }));
  }

  function luhn(digits) {
    let sum = 0;
    for (let i = 0; i < digits.length; i++) {
      let d = Number(digits[digits.length - 1 - i]);
      if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
      sum += d;
    }
    return sum % 10 === 0;
  }

  function payment(s) {
    if (!guard(s, "/checkout/payment")) return null;
    const errors = s.errors.payment || {};
    const submit = () => kit.update(() => {
      const f = s.form;
      const digits = (f.card || "").replace(/\s+/g, "");
      const e = {};
      if (!/^\d{16}$/.test(digits) || !luhn(digits)) e.card = "Enter a valid 16-digit card number";
      if (!f.expiry) e.expiry = "Choose the expiry date";
      const name = kit.required((f["card-name"] || "").trim(), "the name on the card");
      if (name) e["card-name"] = name;
      s.errors.payment = e;
      if (Object.keys(e).length) return;
      s.payment = { card: digits, expiry: f.expiry, name: f["card-name"].trim() };
      kit.go("/checkout/review");
    });
    return page(s, "Payment",
      Object.keys(errors).length ? message("Please correct the errors below.", "error") : null,
      textField({ key: "card", label: "Card number", errors }),
      selectField({ key: "expiry", label: "Expiry date", errors, options: s.expiries.map((x) => [x, x]) }),
      textField({ key: "card-name", label: "Name on card", errors }),
      button("Review order", submit, { class: "primary", "data-key": "to-review" }));
  }

  function review(s) {
    if (!guard(s, "/checkout/review")) return null;
    const total = subtotal(s, s.cart) - discount(s, s.cart) + deliveryPrice(s);
    const place = () => kit.update(() => {
      s.order = {
        number: s.orderNumber, lines: s.cart.map((l) => ({ ...l })), coupon: s.coupon,
        shipping: { ...s.shipping }, delivery: s.delivery, payment: { ...s.payment }, total,
      };
      s.cart = [];
      kit.go(`/order/${s.orderNumber}`);
    });
    const a = s.shipping;
    return page(s, "Review your order",
      h("ul", {}, s.cart.map((l) => h("li", {}, `${l.qty} x ${lineName(s, l)}`))),
      h("p", {}, `Ship to ${a.name}, ${a.street}, ${a.postcode} ${a.city}, ${a.country}`),
      h("p", {}, `Delivery: ${s.delivery}. Card ending ${s.payment.card.slice(-4)}.`),
      h("p", {}, `Total ${money(total)}${s.coupon ? ` with coupon ${s.coupon}` : ""}`),
      link("/cart", "Edit cart", { "data-key": "edit-cart" }),
      h("div", { class: "row" }, button("Place order", place, { class: "primary", "data-key": "place-order" })));
  }

  function confirmation(s, number) {
    if (!s.order || s.order.number !== number) return kit.redirect("/");
    return page(s, "Thank you!",
      message(`Order ${number} has been placed. Total ${money(s.order.total)}.`, "info"));
  }

  kit.mount({
    title: "Nordshop",
    startPath: "/",
    init: (instance) => ({
      ...instance, cart: [], coupon: null, couponMessage: "", tried: [], productMessage: "",
      shipping: null, delivery: null, payment: null, order: null, viewed: [], errors: {},
      form: { qty: "1" },
    }),
    routes: [
      [/^\/$/, home],
      [/^\/search$/, search],
      [/^\/product\/([\w-]+)$/, productPage],
      [/^\/cart$/, cart],
      [/^\/checkout\/shipping$/, shipping],
      [/^\/checkout\/delivery$/, delivery],
      [/^\/checkout\/payment$/, payment],
      [/^\/checkout\/review$/, review],
      [/^\/order\/([\w-]+)$/, confirmation],
    ],
    publicState: (s) => ({
      cart: s.cart, coupon: s.coupon, tried: s.tried, shipping: s.shipping, delivery: s.delivery,
      payment: s.payment, order: s.order, viewed: s.viewed,
    }),
  });
})();
