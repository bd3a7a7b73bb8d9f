"""The docs pages and the admin article editor in a real Chromium: browse, search and read
the docs; an admin writes an article in Markdown, previews it (with and without the live
preview script), publishes it and finds it on /docs. Every page passes check_page."""

from __future__ import annotations

import re

from helpers.app import PASSWORD
from helpers.browser import check_page
from helpers.docs import add_article
from helpers.notices import wait_for_notice


def test_browse_search_and_read_the_docs(page, dbsession):
    add_article(
        dbsession,
        "getting-started",
        title="Install guide",
        summary="Install the software and activate your license",
        category="getting-started",
        days_ago=3,
        body="## Install\n\nUnzip and run:\n\n```sh\n./install --site example.com\n```\n\n"
        "| Step | What |\n|:--|--:|\n| 1 | Unzip |\n| 2 | Run |",
    )
    add_article(
        dbsession,
        "licensing-faq",
        title="Licensing FAQ",
        summary="Seats, staging sites and transfers",
        category="licensing",
        days_ago=1,
    )
    add_article(dbsession, "draft", title="Unfinished draft", published=False)
    page.goto("/docs")
    check_page(page, "docs-list")
    assert page.locator(".docs-list h2").all_inner_texts() == ["Licensing FAQ", "Install guide"]
    assert page.get_by_text("Unfinished draft").count() == 0
    # A category from the list.
    page.locator(".docs-categories").get_by_role("link", name="Licensing").click()
    page.wait_for_url("**/docs?category=licensing")
    assert page.locator(".docs-list h2").all_inner_texts() == ["Licensing FAQ"]
    check_page(page, "docs-category")
    # Search all categories, with the keyboard.
    page.get_by_label("Category").select_option("")
    page.get_by_label("Search the documentation").fill("install")
    page.get_by_label("Search the documentation").press("Enter")
    page.wait_for_url(re.compile(r".*/docs\?q=install.*"))
    assert page.locator(".docs-list h2").all_inner_texts() == ["Install guide"]
    page.get_by_role("link", name="Install guide").click()
    page.wait_for_url("**/docs/getting-started")
    assert page.locator("h1").inner_text() == "Install guide"
    assert page.locator(".prose pre code").inner_text().startswith("./install")
    check_page(page, "docs-article")
    page.get_by_role("link", name="More in Getting started").click()
    page.wait_for_url("**/docs?category=getting-started")
    page.get_by_label("Search the documentation").fill("nothing like this")
    page.get_by_role("button", name="Search").click()
    assert page.get_by_text("No articles match").is_visible()
    check_page(page, "docs-empty-search")
    page.goto("/docs/draft")
    assert page.locator("h1").inner_text() == "Not found"


def test_admin_writes_previews_and_publishes_an_article(page, new_page, site, admin):
    page.goto("/login?next=/admin/articles")
    page.get_by_label("Email").fill(admin.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/articles")
    assert page.get_by_text("There are no articles yet.").is_visible()
    check_page(page, "admin-articles-empty")
    page.get_by_role("link", name="New article").first.click()
    page.wait_for_url("**/admin/articles/new")
    # Errors first: the API's own rules, on their fields, what was typed kept.
    page.get_by_label("Title").fill("Upgrading to version 2")
    page.get_by_label("Slug").fill("Upgrading To 2")
    page.get_by_label("Body (Markdown)").fill("## Before you start\n\nBack up **everything**.")
    page.get_by_role("button", name="Save article").click()
    assert page.locator("#f-slug-error").is_visible()
    assert page.get_by_label("Title").input_value() == "Upgrading to version 2"
    assert "Back up **everything**." in page.get_by_label("Body (Markdown)").input_value()
    check_page(page, "admin-article-errors")
    # Preview (no script needed): the server's sanitised HTML below the form.
    page.get_by_label("Slug").fill("upgrading-to-2")
    page.get_by_label("Category").fill("upgrades")
    page.get_by_label("Body (Markdown)").fill(
        "## Before you start\n\nBack up **everything**.\n\n<script>alert('x')</script>\n\n"
        "1. Download\n2. Replace the files"
    )
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#article-preview-body")
    assert preview.locator("h2").inner_text() == "Before you start"
    assert preview.locator("strong").inner_text() == "everything"
    assert preview.locator("script").count() == 0
    assert "<script>" in preview.inner_text()  # shown as text
    assert page.get_by_label("Slug").input_value() == "upgrading-to-2"
    check_page(page, "admin-article-preview")
    # The live preview script refreshes it while typing.
    page.get_by_label("Body (Markdown)").fill("## Live\n\n*typed* now")
    preview.locator("em", has_text="typed").wait_for()
    assert preview.locator("h2").inner_text() == "Live"
    page.get_by_label("Body (Markdown)").fill(
        "## Before you start\n\nBack up **everything**.\n\n1. Download\n2. Replace the files"
    )
    page.get_by_role("button", name="Save article").click()
    wait_for_notice(page, "article_created")
    page.wait_for_url("**/admin/articles/upgrading-to-2/edit")
    assert page.get_by_role("status").inner_text() == "The article is saved."
    check_page(page, "admin-article-edit")
    # A draft is not on the site yet.
    visitor = new_page(site)
    visitor.goto("/docs")
    assert visitor.get_by_text("Upgrading to version 2").count() == 0
    page.get_by_role("button", name="Publish now").click()
    wait_for_notice(page, "article_published")
    page.wait_for_url("**/admin/articles/upgrading-to-2/edit")
    page.get_by_role("link", name="Articles", exact=True).click()
    page.wait_for_url("**/admin/articles")
    assert page.locator("tbody tr .status").all_inner_texts() == ["Published"]
    check_page(page, "admin-articles")
    visitor.goto("/docs")
    visitor.get_by_role("link", name="Upgrading to version 2").click()
    visitor.wait_for_url("**/docs/upgrading-to-2")
    assert visitor.locator(".prose ol li").all_inner_texts() == ["Download", "Replace the files"]
    check_page(visitor, "docs-article-published")
    # Delete, after the confirmation page.
    page.get_by_role("link", name=re.compile("^Edit")).first.click()
    page.get_by_role("link", name="Delete this article…").click()
    check_page(page, "admin-article-delete")
    page.get_by_role("button", name="Delete the article for good").click()
    wait_for_notice(page, "article_deleted")
    page.wait_for_url("**/admin/articles")
    assert page.get_by_text("There are no articles yet.").is_visible()
