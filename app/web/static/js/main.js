// The web app's entry: sign-in, the page shell and the routes (after `#`, so the server
// serves one page and no token or id ever needs a server route of its own).

import { ApiError, currentUser, humanError, login, logout, onAuthChange, restore, takeNotice } from "./api.js";
import { chatPage, latestSession } from "./chat.js";
import { errorBox, h, mount } from "./dom.js";
import { organisationFromAddress, showSignInOptions, takeRefusal } from "./sso.js";

const ADMIN_PAGES = {
  kb: ["Knowledge base", () => import("./admin/kb.js")],
  collections: ["Collections", () => import("./admin/collections.js")],
  groups: ["Groups", () => import("./admin/groups.js")],
  users: ["Users & API keys", () => import("./admin/users.js")],
  faqs: ["FAQs", () => import("./admin/faqs.js")],
  guardrails: ["Guardrails", () => import("./admin/policy.js")],
  retention: ["Retention", () => import("./admin/policy.js")],
  sso: ["SSO", () => import("./admin/sso.js")],
  audit: ["Audit", () => import("./admin/audit.js")],
  log: ["Audit log", () => import("./admin/audit.js")],
};

const app = document.getElementById("app");
let closeMenu = () => false; // the open header menu's, for Esc

document.addEventListener(
  "keydown",
  (event) => {
    // Capture: the menu closes before Esc reaches the chat (which would stop an answer).
    if (event.key === "Escape" && closeMenu()) event.stopPropagation();
  },
  { capture: true },
);

function loginPage() {
  document.title = "Sign in — Threadline";
  const email = h("input", { id: "email", type: "email", autocomplete: "username", required: true });
  const password = h("input", { id: "password", type: "password", autocomplete: "current-password", required: true });
  const organisation = organisationFromAddress();
  const tenant = h("input", { id: "tenant", type: "text", autocomplete: "organization", value: organisation });
  const refusal = takeRefusal();
  const notice = refusal || takeNotice();
  const error = h("p", { class: notice && !refusal ? "notice" : "error", role: "alert", hidden: !notice }, notice);
  const button = h("button", { type: "submit", class: "primary" }, "Sign in");
  const sso = h("div", { class: "sso-options" });
  const passwordLabel = h("label", { for: "password" }, "Password");
  const details = h("details", { open: Boolean(organisation) }, h("summary", {}, "Organisation (only if asked)"), h("label", { for: "tenant" }, "Organisation name"), tenant);
  const form = h(
    "form",
    { class: "login card", "aria-labelledby": "login-title" },
    h("h1", { id: "login-title" }, "Sign in to Threadline"),
    h("label", { for: "email" }, "E-mail"),
    email,
    passwordLabel,
    password,
    details,
    sso,
    button,
    error,
  );
  // An organisation that signs in only through its identity provider has no password field.
  const passwordLogin = (allowed) => {
    for (const el of [passwordLabel, password, button]) el.hidden = !allowed;
    password.required = allowed;
  };
  const offerSso = () => showSignInOptions(sso, tenant.value.trim(), () => email.value.trim(), passwordLogin);
  tenant.addEventListener("change", offerSso);
  offerSso();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    error.hidden = true;
    try {
      await login(email.value, password.value, tenant.value.trim() || null);
      route();
    } catch (e) {
      error.textContent = humanError(e);
      error.className = "error";
      error.hidden = false;
      if (e instanceof ApiError && e.code === "password_login_disabled" && !sso.childElementCount) {
        error.textContent = "Your organisation signs in with single sign-on: type its name under Organisation.";
        details.open = true;
        tenant.focus();
      }
    } finally {
      button.disabled = false;
    }
  });
  mount(app, h("main", { id: "main", class: "login-page" }, form));
  email.focus();
}

function shell(user, current) {
  const link = (href, label, key) => h("a", { href, "aria-current": current === key ? "page" : null }, label);
  const nav = h("nav", { class: "top-nav", id: "top-nav", "aria-label": "Main" }, link("#/", "Chat", "chat"), link("#/me", "My data", "me"));
  if (user.role === "admin") {
    for (const [key, [label]] of Object.entries(ADMIN_PAGES)) nav.append(link(`#/admin/${key}`, label, `admin/${key}`));
  }
  const out = h("button", { type: "button", class: "secondary" }, "Log out");
  out.addEventListener("click", async () => {
    await logout();
    location.hash = "#/";
  });
  // On a phone the links fold behind "Menu" (the header stays one line); Esc or a link closes it.
  const menu = h("button", { type: "button", class: "secondary menu-toggle", "aria-controls": "top-nav", "aria-expanded": "false" }, "Menu");
  const header = h("header", { class: "top" }, h("a", { class: "brand", href: "#/" }, "Threadline"), menu, nav, h("span", { class: "who" }, user.email), out);
  const showMenu = (open) => {
    header.classList.toggle("menu-open", open);
    menu.setAttribute("aria-expanded", String(open));
  };
  menu.addEventListener("click", () => showMenu(!header.classList.contains("menu-open")));
  nav.addEventListener("click", (event) => {
    if (event.target.closest("a")) showMenu(false);
  });
  closeMenu = () => {
    if (!header.isConnected || !header.classList.contains("menu-open")) return false;
    showMenu(false);
    menu.focus();
    return true;
  };
  const main = h("main", { id: "main", tabindex: "-1" });
  mount(app, header, main);
  return main;
}

const hashPath = () => location.hash.replace(/^#/, "") || "/";

async function route() {
  const user = currentUser();
  if (!user) return loginPage();
  const path = hashPath();
  const parts = path.split("/").filter(Boolean);
  try {
    if (parts[0] === "c" && parts[1]) {
      await chatPage(shell(user, "chat"), parts[1]);
    } else if (parts[0] === "new") {
      await chatPage(shell(user, "chat"), null);
    } else if (parts[0] === "me") {
      const { mePage } = await import("./me.js"); // only when opened: off the first load
      await mePage(shell(user, "me"));
    } else if (parts[0] === "admin") {
      const key = parts[1] || "kb";
      const main = shell(user, `admin/${key}`);
      if (user.role !== "admin") {
        document.title = "Refused — Threadline";
        mount(main, h("section", { class: "card refused" }, h("h1", {}, "Refused"), errorBox("This page is for administrators only.")));
        return;
      }
      const page = ADMIN_PAGES[key];
      if (!page) throw new Error("no such page");
      document.title = `${page[0]} — Threadline`;
      const module = await page[1]();
      await module.render(main, key, parts.slice(2));
    } else {
      const id = await latestSession();
      // Gone elsewhere meanwhile (a link followed just after signing in): stay there.
      if (hashPath() !== path) return;
      location.replace(id ? `#/c/${id}` : "#/new");
    }
  } catch (e) {
    const main = app.querySelector("main") || shell(user, "");
    mount(main, errorBox(humanError(e)));
  }
}

onAuthChange((user) => {
  if (!user) loginPage();
});
window.addEventListener("hashchange", route);

restore().then(route);
