package org.gpuops

import com.lesfurets.jenkins.unit.global.lib.SourceRetriever

/** Serves the shared library from this repository's own working tree (src/, vars/, resources/). */
class RepositorySource implements SourceRetriever {

    final String root

    RepositorySource(String root) {
        this.root = root
    }

    @Override
    List<URL> retrieve(String repository, String branch, String targetPath) {
        return [new File(root).toURI().toURL()]
    }

}
